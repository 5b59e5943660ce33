//go:build race

package main

// raceEnabled: the e2e binary is built with -race too, so it shares the
// test's build cache and its races are caught.
const raceEnabled = true
