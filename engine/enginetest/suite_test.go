package enginetest

import (
	"testing"

	"github.com/rbctl/rbctl/internal/blockdev"
)

func TestSuiteOnMem(t *testing.T) {
	RunEngineSuite(t, func(t *testing.T) blockdev.Device { return blockdev.NewMem(MinDeviceBytes, 0) })
}

func TestSuiteOnDirectMem(t *testing.T) {
	RunEngineSuite(t, func(t *testing.T) blockdev.Device { return blockdev.NewMem(MinDeviceBytes, 4096) })
}
