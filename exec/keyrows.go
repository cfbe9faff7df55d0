package exec

import "rsql/sql"

// keyRows are the key values of a window's groups, one row per group. When every key
// column is of a type whose values hold no string (BOOLEAN, INT, BIGINT, DOUBLE, TIMESTAMP,
// INTERVAL: narrowKeyTypes), a value is kept in 16 bytes (its kind, scale and payload bits)
// instead of a whole sql.Value (32); a value with a string that comes anyway turns the
// window's rows into whole values. at materializes a row.
type keyRows struct {
	width  int
	narrow bool
	nar    pagedRows[narrowKey]
	wide   pagedRows[sql.Value]
	buf    []sql.Value // at's row in narrow mode
}

type narrowKey struct {
	k     sql.Kind
	scale uint8
	bits  int64 // I, or F's IEEE bits for a DOUBLE
}

// narrowKeyTypes reports whether key columns of types ts hold no strings.
func narrowKeyTypes(ts []sql.Type, nk int) bool {
	if len(ts) != nk {
		return false
	}
	for _, t := range ts {
		switch t.Kind {
		case sql.KindBool, sql.KindInt, sql.KindBigInt, sql.KindDouble, sql.KindTimestamp, sql.KindInterval:
		default:
			return false
		}
	}
	return true
}

func newKeyRows(width int, narrow bool) keyRows {
	return keyRows{width: width, narrow: narrow, nar: newPagedRows[narrowKey](width), wide: newPagedRows[sql.Value](width)}
}

// toNarrow and value convert between a value and its narrow form: a DOUBLE's bits are in I
// as every other narrow kind's payload.
func toNarrow(v sql.Value) narrowKey { return narrowKey{k: v.K, scale: v.Scale, bits: v.I} }

func (n narrowKey) value() sql.Value { return sql.Value{K: n.k, Scale: n.scale, I: n.bits} }

// add appends a row of vals (strings copied: state never aliases a decoder's buffer).
func (r *keyRows) add(vals []sql.Value) {
	if r.narrow {
		for _, v := range vals {
			if v.S != "" {
				r.widen()
				break
			}
		}
	}
	if r.narrow {
		row := r.nar.add()
		for i, v := range vals {
			row[i] = toNarrow(v)
		}
		return
	}
	row := r.wide.add()
	for i, v := range vals {
		row[i] = ownValue(v)
	}
}

// widen turns the rows into whole values.
func (r *keyRows) widen() {
	for g := range r.nar.n {
		row := r.wide.add()
		for i, n := range r.nar.at(g) {
			row[i] = n.value()
		}
	}
	r.nar.truncate(0)
	r.narrow = false
}

// at returns row g: a view, or in narrow mode a copy valid until the next call.
func (r *keyRows) at(g int) []sql.Value {
	if !r.narrow {
		return r.wide.at(g)
	}
	if r.buf == nil {
		r.buf = make([]sql.Value, r.width)
	}
	for i, n := range r.nar.at(g) {
		r.buf[i] = n.value()
	}
	return r.buf
}

// equal reports whether row g equals vals (sql.Equal value by value).
func (r *keyRows) equal(g int, vals []sql.Value) bool {
	if !r.narrow {
		return valuesEqual(r.wide.at(g), vals)
	}
	for i, n := range r.nar.at(g) {
		v := vals[i]
		if n.k == v.K && n.k != sql.KindDouble && v.S == "" {
			if n.bits != v.I || n.scale != v.Scale {
				return false
			}
			continue
		}
		if !sql.Equal(n.value(), v) {
			return false
		}
	}
	return true
}

// appendRow appends row g of src.
func (r *keyRows) appendRow(src *keyRows, g int) { r.add(src.at(g)) }

func (r *keyRows) truncate(n int) {
	if r.narrow {
		r.nar.truncate(n)
	} else {
		r.wide.truncate(n)
	}
}

// reset empties r (narrow again if it was made so), keeping its first pages.
func (r *keyRows) reset(narrow bool) {
	r.nar.reset()
	r.wide.reset()
	r.narrow = narrow
}
