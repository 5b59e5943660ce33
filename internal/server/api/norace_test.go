//go:build !race

package api_test

// raceEnabled: tests size their loads down under the race detector.
const raceEnabled = false
