package bench

import (
	"syscall"
	"time"
)

// cpuTime returns the user and system CPU time of this process so far
// (embedded servers included: they run in it), 0 where unsupported.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the CPU this process uses over an interval.
type cpuMeter struct {
	wall time.Time
	cpu  time.Duration
}

func startCPU() cpuMeter { return cpuMeter{wall: time.Now(), cpu: cpuTime()} }

// cores returns the average number of cores busy since start, and the CPU
// time per item for n items.
func (m cpuMeter) stop(n int) (cores float64, perItem time.Duration) {
	cpu := cpuTime() - m.cpu
	wall := time.Since(m.wall)
	if wall <= 0 || n <= 0 {
		return 0, 0
	}
	return float64(cpu) / float64(wall), cpu / time.Duration(n)
}
