package datalock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestAcquireTwiceFailsNamingThePid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q (%v), want our pid %d", b, err, os.Getpid())
	}
	// A second open file description conflicts, even in this process.
	_, err = Acquire(dir)
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) || he.Pid != os.Getpid() {
		t.Fatalf("second Acquire: %v, want HeldError with pid %d", err, os.Getpid())
	}
	if !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("error does not name the pid: %v", err)
	}
	if pid, held := Holder(dir); !held || pid != os.Getpid() {
		t.Fatalf("Holder = %d, %v", pid, held)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal("second Release:", err)
	}
	if _, held := Holder(dir); held {
		t.Fatal("Holder says held after Release")
	}
	l2, err := Acquire(dir)
	if err != nil {
		t.Fatal("Acquire after Release:", err)
	}
	defer l2.Release()
	if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
}

func TestHolderWithoutLockFile(t *testing.T) {
	if _, held := Holder(t.TempDir()); held {
		t.Fatal("held without a lock file")
	}
	var l *Lock
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}
