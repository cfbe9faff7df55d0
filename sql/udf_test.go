package sql

import (
	"strings"
	"testing"
)

func TestCheckFunctionName(t *testing.T) {
	for _, ok := range []string{"eur", "risk_score", "weighted_avg", "f2"} {
		if err := CheckFunctionName(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for name, code := range map[string]string{"upper": "42723", "COUNT": "42723", "version": "42723", "tumble_start": "42723",
		"if": "42723", "group_concat": "42602", "cast": "42602", "__rsql_x": "42602", "std": "42602"} {
		err := CheckFunctionName(name)
		if e, ok := err.(*Error); !ok || e.Code != code {
			t.Errorf("%s: got %v, want %s", name, err, code)
		}
	}
}

func TestBindFunctionBody(t *testing.T) {
	params := Schema{{"usd", TypeDouble}, {"n", TypeInt}}
	e, err := BindFunctionBody("eur", "usd * 0.908 + n", params, newTestCatalog())
	if err != nil {
		t.Fatal(err)
	}
	if got := e.String(); got != "((usd * 0.908) + n)" || e.Type() != TypeDouble {
		t.Errorf("body = %s : %s", got, e.Type())
	}
	v, err := Eval(e, Row{Double(100), Int(2)})
	if err != nil || v.F() != 92.8 {
		t.Errorf("eval = %v %v", v, err)
	}
	for body, want := range map[string]string{
		"usd ||| 2":                 "42601",
		"nope + 1":                  "42703",
		"usd + 'a' || true":         "42804",
		"usd FROM orders WHERE n>1": "42601",
		"SUM(usd)":                  "42803",
		"1; DROP STREAM orders":     "42601",
		"no_such_function(usd)":     "42883",
	} {
		_, err := BindFunctionBody("eur", body, params, newTestCatalog())
		e, ok := err.(*Error)
		if !ok || e.Code != want {
			t.Errorf("%q: got %v, want %s", body, err, want)
		}
	}
	// Positions point into the body, and BodyError places them in the statement.
	text := "CREATE FUNCTION eur(usd DOUBLE) RETURNS DOUBLE AS $$usd + nope$$"
	st, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	cf := st[0].(*CreateFunction)
	_, err = BindFunctionBody("eur", cf.Body, cf.Params, newTestCatalog())
	pe := cf.BodyError(err).(*Error)
	if pe.Pos != strings.Index(text, "nope") || pe.Line != 1 || pe.Column != strings.Index(text, "nope")+1 {
		t.Errorf("positioned error %+v, want at %d", pe, strings.Index(text, "nope"))
	}
}

// TestCheckFunctionNameMessages pins which 42723 message each kind of built-in name gets:
// registry functions and session constants are "built in" functions, the names the
// binder reads as syntax are "built-in names", aggregates and table functions say so.
func TestCheckFunctionNameMessages(t *testing.T) {
	for name, want := range map[string]string{
		"upper":           "function upper is built in: choose another name",
		"trim":            "function trim is built in: choose another name",
		"json_get":        "function json_get is built in: choose another name",
		"Version":         "function version is built in: choose another name",
		"current_user":    "function current_user is built in: choose another name",
		"if":              "if is a built-in name: choose another name",
		"position":        "position is a built-in name: choose another name",
		"locate":          "locate is a built-in name: choose another name",
		"HOP_END":         "hop_end is a built-in name: choose another name",
		"count":           "aggregate count is built in: choose another name",
		"generate_series": "table function generate_series is built in: choose another name",
	} {
		err := CheckFunctionName(name)
		if e, ok := err.(*Error); !ok || e.Code != CodeDuplicateFunction || e.Message != want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
	}
	// An Unlisted name answers only to its own spelling: "ıf" upper-cases to IF but was
	// never the binder's IF.
	if _, ok := lookupName("ıf"); ok {
		t.Error(`lookupName("ıf") found IF`)
	}
}
