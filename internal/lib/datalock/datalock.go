// Package datalock holds a ledger data directory for one process: an
// exclusive OS file lock (flock(2)) on <data>/ledger.lock, taken before
// anything else in the directory is touched and held until the process
// releases it or exits (the kernel drops it with the process, so a killed
// holder never leaves a stale lock).
//
// The holder writes its pid into the file, so a second process fails at
// once with an error naming it (ErrHeld). The file itself is never
// removed: removing it would let a third process lock a new file of the
// same name while the second still holds the old one.
package datalock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// FileName is the lock file under the data directory.
const FileName = "ledger.lock"

// ErrHeld is returned (wrapped, with the holder's pid when known) when
// another process, or another Acquire of this process, holds the lock.
var ErrHeld = errors.New("datalock: data directory in use")

// Lock is a held lock. Release it with Release (safe twice).
type Lock struct {
	path string
	f    *os.File
	once sync.Once
	err  error
}

// HeldError is the error of an Acquire that found the lock held.
type HeldError struct {
	Dir string
	// Pid is the holder's pid as written in the lock file; 0 when it
	// could not be read (the holder is still starting).
	Pid int
}

func (e *HeldError) Error() string {
	who := "another process"
	if e.Pid > 0 {
		who = "process " + strconv.Itoa(e.Pid)
	}
	return fmt.Sprintf("%v: %s holds %s (a `ledger serve` or an offline command on the same --data): stop it first, or run the command online with --api",
		ErrHeld, who, filepath.Join(e.Dir, FileName))
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Acquire creates dir if needed and takes its lock without waiting. When
// another holder has it, the error is a *HeldError (errors.Is ErrHeld).
func Acquire(dir string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("datalock: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("datalock: %w", err)
	}
	if err := flock(f); err != nil {
		pid := readPid(f)
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, Pid: pid}
		}
		return nil, fmt.Errorf("datalock: lock %s: %w", path, err)
	}
	// Ours: say who holds it.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("datalock: write %s: %w", path, err)
		}
	} else {
		_ = f.Close()
		return nil, fmt.Errorf("datalock: truncate %s: %w", path, err)
	}
	return &Lock{path: path, f: f}, nil
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

func readPid(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// Holder reports whether dir's lock is held by someone else, and the pid
// written in it. It takes the lock for an instant when it is free (and
// then reports false): use it only for advice, never as a guarantee.
func Holder(dir string) (pid int, held bool) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, false // no lock file: nobody ever held it
	}
	defer f.Close()
	if err := flock(f); err != nil {
		return readPid(f), errors.Is(err, unix.EWOULDBLOCK)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return 0, false
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release drops the lock (the file stays, see the package comment). It is
// safe to call twice and on a nil Lock.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		// Closing the only descriptor releases the flock.
		if err := l.f.Close(); err != nil {
			l.err = fmt.Errorf("datalock: release %s: %w", l.path, err)
		}
	})
	return l.err
}
