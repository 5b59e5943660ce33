//go:build race

package crashtest_test

// raceEnabled: binaries the tests build get -race too, so that they share
// the test's build cache and their races are caught.
const raceEnabled = true
