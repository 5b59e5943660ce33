//go:build linux

package repair

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchange atomically swaps the directories a and b and returns the path
// that now holds what a held. A filesystem without RENAME_EXCHANGE falls
// back to two renames.
func exchange(a, b string) (string, error) {
	err := unix.Renameat2(unix.AT_FDCWD, b, unix.AT_FDCWD, a, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return exchangeByRenames(a, b)
	}
	if err != nil {
		return "", err
	}
	return b, nil
}
