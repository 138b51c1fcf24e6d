//go:build race

package nvmetcp

// raceEnabled: the race detector makes sync.Pool drop buffers at random, so allocation
// counts are not meaningful.
const raceEnabled = true
