//go:build !race

package nvmetcp

const raceEnabled = false
