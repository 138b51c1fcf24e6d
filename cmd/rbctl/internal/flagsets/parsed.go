package flagsets

import "github.com/spf13/pflag"

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
