//go:build linux

package projections

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time of the calling OS thread in nanoseconds
// (the caller locks its goroutine to the thread), so that a benchmark can
// report work per operation that does not count time spent waiting for a
// CPU on a busy machine.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return ts.Nano()
}
