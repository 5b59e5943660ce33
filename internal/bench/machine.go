package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Machine describes where a run happened.
type Machine struct {
	CPU        string // model name
	CPUs       int    // logical CPUs
	GOMAXPROCS int
	MemTotal   int64 // bytes, 0 when unknown
	OS, Arch   string
	Go         string
	// Cgo is the binary's CGO_ENABLED ("" when unknown); MemLimit the Go
	// runtime's soft memory limit (math.MaxInt64: none).
	Cgo       string
	MemLimit  int64
	GCPercent int // GOGC (negative: off)
}

// describeMachine reads what it can from /proc (Linux); elsewhere the CPU
// model and memory are left empty.
func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version(),
		MemLimit: debug.SetMemoryLimit(-1)} // a negative value only reads it
	m.GCPercent = debug.SetGCPercent(100)
	debug.SetGCPercent(m.GCPercent)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "CGO_ENABLED" {
				m.Cgo = st.Value
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if kib, ok := procField("/proc/meminfo", "MemTotal"); ok {
		m.MemTotal = kib << 10
	}
	return m
}

func (m Machine) String() string {
	cpu := m.CPU
	if cpu == "" {
		cpu = "unknown CPU"
	}
	s := fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d)", cpu, m.CPUs, m.GOMAXPROCS)
	if m.MemTotal > 0 {
		s += fmt.Sprintf(", %.1f GiB RAM", float64(m.MemTotal)/(1<<30))
	}
	s += fmt.Sprintf(", %s/%s, %s", m.OS, m.Arch, m.Go)
	if m.Cgo != "" {
		s += ", CGO_ENABLED=" + m.Cgo
	}
	s += fmt.Sprintf(", GOGC %d", m.GCPercent)
	if m.MemLimit > 0 && m.MemLimit < math.MaxInt64 {
		s += fmt.Sprintf(", Go memory limit %d MiB", m.MemLimit>>20)
	} else {
		s += ", no Go memory limit"
	}
	return s
}

// loadAvg returns /proc/loadavg's three figures as text ("" when unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procField returns a "Name:   123 kB" field of a /proc status-like file,
// in KiB.
func procField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseProcField(b, name)
}

func parseProcField(b []byte, name string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n, err == nil
	}
	return 0, false
}
