package ledger

// The package's one test seam, named as Pebble names its own (TestOnly…):
// production code never sets the hooks nor calls TestOnlyCountDecodes.

// testOnlyOnDecode and testOnlyOnValidate, when set (by
// TestOnlyCountDecodes only), are called on each envelope decode and each
// kernel payload validation.
var testOnlyOnDecode, testOnlyOnValidate func()

// TestOnlyCountDecodes runs f and returns how many envelopes it decoded
// and how many kernel payloads it validated: tests prove with it that a
// submission is decoded once on its way to the log. It is not safe for
// concurrent use, nor with decodes running elsewhere meanwhile.
func TestOnlyCountDecodes(f func()) (decodes, validations int) {
	testOnlyOnDecode = func() { decodes++ }
	testOnlyOnValidate = func() { validations++ }
	defer func() { testOnlyOnDecode, testOnlyOnValidate = nil, nil }()
	f()
	return decodes, validations
}
