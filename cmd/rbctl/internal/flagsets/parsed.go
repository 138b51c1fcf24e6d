package flagsets

import (
	"encoding"

	"github.com/spf13/pflag"
)

// parsed is a flag whose text is parsed by the library that owns the value when it is set,
// so a bad value is refused with the flag's name before anything runs.
type parsed[T any] struct {
	dst   *T
	text  string
	parse func(string) (T, error)
}

// Parsed returns a flag value that stores parse(text) in *dst; def is parsed at once (a
// default that does not parse is a programming error and panics).
func Parsed[T any](dst *T, def string, parse func(string) (T, error)) pflag.Value {
	v := &parsed[T]{dst: dst, parse: parse}
	if err := v.Set(def); err != nil {
		panic("flag default " + def + ": " + err.Error())
	}
	return v
}

func (v *parsed[T]) String() string { return v.text }
func (v *parsed[T]) Type() string   { return "string" }
func (v *parsed[T]) Set(s string) error {
	t, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.dst, v.text = t, s
	return nil
}

// textUnmarshaler is a *T that parses itself from text.
type textUnmarshaler[T any] interface {
	*T
	encoding.TextUnmarshaler
}

// Text is Parsed for a value whose type parses itself (encoding.TextUnmarshaler), so the
// command names neither the type nor the package that owns it.
func Text[T any, PT textUnmarshaler[T]](dst *T, def string) pflag.Value {
	return Parsed(dst, def, parseText[T, PT])
}

// Optional is Text for an optional value: *dst stays nil unless the flag is given (the
// library then chooses); def is what the help shows.
func Optional[T any, PT textUnmarshaler[T]](dst **T, def string) pflag.Value {
	if _, err := parseText[T, PT](def); err != nil {
		panic("flag default " + def + ": " + err.Error())
	}
	return &optional[T, PT]{dst: dst, text: def}
}

type optional[T any, PT textUnmarshaler[T]] struct {
	dst  **T
	text string
}

func (v *optional[T, PT]) String() string { return v.text }
func (v *optional[T, PT]) Type() string   { return "string" }
func (v *optional[T, PT]) Set(s string) error {
	t, err := parseText[T, PT](s)
	if err != nil {
		return err
	}
	*v.dst, v.text = &t, s
	return nil
}

func parseText[T any, PT textUnmarshaler[T]](s string) (T, error) {
	var v T
	err := PT(&v).UnmarshalText([]byte(s))
	return v, err
}
