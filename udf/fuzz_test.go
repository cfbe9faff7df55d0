package udf

import (
	"testing"

	"rsql/sql"
)

// FuzzAggregateState feeds arbitrary stored state to a JavaScript aggregate as a restore
// would: Decode refuses what is not JSON, and whatever it accepts gives a result or the
// row's error value, never a panic.
func FuzzAggregateState(f *testing.F) {
	r := NewRuntime()
	defer r.Close()
	d, err := r.Agg(Spec{Name: "wavg", Aggregate: true, Language: LangJS, Body: weightedAvg, Returns: sql.TypeDouble,
		Params: sql.Schema{{Name: "v", Type: sql.TypeDouble}, {Name: "w", Type: sql.TypeDouble}}})
	if err != nil {
		f.Fatal(err)
	}
	a, err := d.New(sql.AggCall{Func: d.Name, T: sql.TypeDouble, Def: d})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`{"s": 10, "w": 2}`)
	f.Add(`null`)
	f.Fuzz(func(t *testing.T, stored string) {
		s := sql.AggState{V: sql.JSONValue(stored)}
		if err := a.Decode(&s); err != nil {
			return
		}
		a.Add(&s, []sql.Value{sql.Double(1), sql.Double(1)})
		a.Result(&s)
		if err := a.Encode(&s); err != nil && s.V.K == sql.KindJSON {
			t.Logf("encode: %v", err)
		}
	})
}
