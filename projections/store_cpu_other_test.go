//go:build !linux

package projections

// threadCPU is unavailable here: benchmarks report no CPU figures.
func threadCPU() int64 { return -1 }
