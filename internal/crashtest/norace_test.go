//go:build !race

package crashtest_test

const raceEnabled = false
