package main

import (
	"regexp"
	"sort"
	"strings"
)

// goPrefix matches the Go package prefixes of the libraries' errors
// ("client: invalid options: ", "repair: "): words for a programmer, not
// for the person at the command line. userMessage drops them.
var goPrefix = regexp.MustCompile(`(^|: )(?:(?:client|app): invalid options: |(?:client|app|projections|projector|repair|archive|replay|bridge|authcfg|httpauth|natsserver|datalock|appendlog|evidence|proofs|submit|time|strconv\.[A-Za-z]+): )`)

// userMessage is an error's message as the CLI prints it: without the Go
// package prefixes.
func userMessage(msg string) string {
	for {
		out := goPrefix.ReplaceAllString(msg, "$1")
		if out == msg {
			return out
		}
		msg = out
	}
}

// suggest returns the candidate closest to word when it is close enough to
// be a typo (an edit distance of at most 2, and less than half the word),
// else "".
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted) // a stable answer among equals
	for _, c := range sorted {
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d < bestD && d*2 < len(word) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment: a swap of neighbours counts one).
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
