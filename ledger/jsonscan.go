package ledger

import (
	"bytes"
	"encoding/json"
)

// A light scanner over JSON text that canon.Canonical has already
// accepted (valid UTF-8, valid JSON, no duplicate keys, bounded depth). It
// does no validation of its own: it only splits an object into its members
// and an array into its elements, as encoding/json would decode them into
// map[string]json.RawMessage and []json.RawMessage (values without their
// surrounding white space, keys decoded), at a fraction of the cost. Decode
// used to parse each envelope four times with encoding/json on top of the
// canon pass; this is what replaces those passes. It is the ledger's one
// JSON accessor kit: the kernel validation (kernel_validate.go's k*
// checks, on a payload canon accepted first) and IsBareKernel (after
// json.Valid) read through it too.

// jsonMember is one object member: its decoded key and its raw value.
type jsonMember struct {
	name string
	val  json.RawMessage
}

// fields is an object's members, raw (as sent), in input order. Objects
// have no duplicate keys (canon refuses them), so a name is found at most
// once.
type fields []jsonMember

// scanWS returns the index of the first non-white-space byte at or after i.
func scanWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString returns the index just after the string that starts (with
// its opening quote) at i.
func scanString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b) // unreachable for valid JSON
		}
		j += i
		k := j - 1
		for b[k] == '\\' { // b[i-1] is a quote, so this stops
			k--
		}
		if (j-1-k)%2 == 0 { // an even number of backslashes: not escaped
			return j + 1
		}
		i = j + 1
	}
}

// scanValue returns the index just after the value that starts at i.
func scanValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return scanString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = scanString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number or literal
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// splitObject splits the object v (valid JSON, starting with '{') into its
// members.
func splitObject(v []byte) fields { return splitObjectInto(make(fields, 0, 10), v) }

// splitObjectInto is splitObject appending to f (a caller's buffer, which
// spares an allocation on the decode path).
func splitObjectInto(f fields, v []byte) fields {
	i := scanWS(v, 1)
	if i < len(v) && v[i] == '}' {
		return f
	}
	for i < len(v) {
		end := scanString(v, i)
		name, ok := knownName(v[i+1 : end-1])
		if !ok {
			name = decodeString(v[i:end])
		}
		i = scanWS(v, end)
		i = scanWS(v, i+1) // ':'
		end = scanValue(v, i)
		f = append(f, jsonMember{name: name, val: v[i:end:end]})
		i = scanWS(v, end)
		if i >= len(v) || v[i] != ',' {
			break
		}
		i = scanWS(v, i+1)
	}
	return f
}

// findMember returns the value of member name of the object v (valid
// JSON, starting with '{') without splitting the rest.
func findMember(v []byte, name string) (json.RawMessage, bool) {
	i := scanWS(v, 1)
	if i < len(v) && v[i] == '}' {
		return nil, false
	}
	for i < len(v) {
		end := scanString(v, i)
		key := v[i+1 : end-1]
		match := string(key) == name
		if !match && bytes.IndexByte(key, '\\') >= 0 {
			match = decodeString(v[i:end]) == name
		}
		i = scanWS(v, end)
		i = scanWS(v, i+1) // ':'
		end = scanValue(v, i)
		if match {
			return v[i:end:end], true
		}
		i = scanWS(v, end)
		if i >= len(v) || v[i] != ',' {
			break
		}
		i = scanWS(v, i+1)
	}
	return nil, false
}

// splitArray splits the array v (valid JSON, starting with '[') into its
// elements.
func splitArray(v []byte) []json.RawMessage {
	return splitArrayInto(nil, v)
}

// splitArrayInto is splitArray appending to items (a caller's buffer:
// most arrays of an envelope are short, and a stack buffer spares the
// allocation).
func splitArrayInto(items []json.RawMessage, v []byte) []json.RawMessage {
	i := scanWS(v, 1)
	if i < len(v) && v[i] == ']' {
		return items
	}
	for i < len(v) {
		end := scanValue(v, i)
		items = append(items, v[i:end:end])
		i = scanWS(v, end)
		if i >= len(v) || v[i] != ',' {
			break
		}
		i = scanWS(v, i+1)
	}
	return items
}

// decodeString decodes the JSON string literal s (quotes included), valid
// JSON of valid UTF-8: without escapes its bytes are the value.
// knownValue returns the protocols and kinds every envelope carries as
// constant strings (the switch does not allocate), sparing two
// allocations an envelope; ok is false for any other value. b is a string
// literal's bytes without its quotes: an escaped spelling is not known
// (decodeString decodes it).
func knownValue(b []byte) (string, bool) {
	switch string(b) {
	case DialectMEW04:
		return DialectMEW04, true
	case DialectMEW03:
		return DialectMEW03, true
	case DialectMEUP02:
		return DialectMEUP02, true
	case DialectMEUP01:
		return DialectMEUP01, true
	case DialectMCPX01:
		return DialectMCPX01, true
	case KindProposal:
		return KindProposal, true
	case KindWithdraw:
		return KindWithdraw, true
	case KindReject:
		return KindReject, true
	case KindRequest:
		return KindRequest, true
	case KindResponse:
		return KindResponse, true
	case KindChat:
		return KindChat, true
	case KindExpire:
		return KindExpire, true
	case KindGap:
		return KindGap, true
	}
	return "", false
}

// knownName returns the member names envelopes and their payloads use as
// constant strings (the switch does not allocate), sparing an allocation
// per member; ok is false for any other name.
func knownName(b []byte) (string, bool) {
	switch string(b) {
	case "protocol":
		return "protocol", true
	case "id":
		return "id", true
	case "ts":
		return "ts", true
	case "from":
		return "from", true
	case "to":
		return "to", true
	case "kind":
		return "kind", true
	case "correlation_id":
		return "correlation_id", true
	case "correlationId":
		return "correlationId", true
	case "context":
		return "context", true
	case "payload":
		return "payload", true
	case "method":
		return "method", true
	case "params":
		return "params", true
	case "jsonrpc":
		return "jsonrpc", true
	case "reason":
		return "reason", true
	case "result":
		return "result", true
	case "error":
		return "error", true
	case "message":
		return "message", true
	}
	return "", false
}

func decodeString(s []byte) string {
	inner := s[1 : len(s)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner)
	}
	var out string
	if err := json.Unmarshal(s, &out); err != nil {
		return "" // unreachable for valid JSON
	}
	return out
}

// member returns a member's value, or nil and false when absent.
func (f fields) member(name string) (json.RawMessage, bool) {
	for _, m := range f {
		if m.name == name {
			return m.val, true
		}
	}
	return nil, false
}

// without returns f without the member name (a copy).
func (f fields) without(name string) fields {
	out := make(fields, 0, len(f))
	for _, m := range f {
		if m.name != name {
			out = append(out, m)
		}
	}
	return out
}

// EachMember calls f with the raw key (the bytes between its quotes, escapes
// left as they are) and the raw value of every member of the object v, in
// input order, until f returns false. v must be JSON text canon accepted
// (valid, no duplicate keys): the scanner does no validation of its own.
// It returns false when v is not an object.
func EachMember(v []byte, f func(rawKey []byte, val json.RawMessage) bool) bool {
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	i := scanWS(v, 1)
	if i < len(v) && v[i] == '}' {
		return true
	}
	for i < len(v) {
		end := scanString(v, i)
		key := v[i+1 : end-1]
		i = scanWS(v, end)
		i = scanWS(v, i+1) // ':'
		end = scanValue(v, i)
		if !f(key, v[i:end:end]) {
			return true
		}
		i = scanWS(v, end)
		if i >= len(v) || v[i] != ',' {
			break
		}
		i = scanWS(v, i+1)
	}
	return true
}
