package broker

import (
	"encoding/json"
	"fmt"
)

// plainJSON encodes a reply body or file built only of strings, integers, bools, slices,
// maps with string keys, structs of those, and json.RawMessage that came out of decoding
// JSON (a heartbeat's subscriptions). For such values json.Marshal cannot fail: it fails
// only on channels, functions, complex numbers, NaN or infinite floats, cycles and
// Marshaler errors, none of which these values hold. A failure is therefore a programming
// error and panics, as regexp.MustCompile does, rather than sending an empty body.
func plainJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("broker: encoding %T: %v", v, err))
	}
	return b
}
