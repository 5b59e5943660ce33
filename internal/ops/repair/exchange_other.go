//go:build !linux

package repair

func exchange(a, b string) (string, error) { return exchangeByRenames(a, b) }
