package engine

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON reader for LMCache's v1 checkpoint: objects keep their key order (LMCache's
// entries are in insertion order), integers stay exact, and it is fast enough for millions
// of entries. Values: nil, bool, string, jsonNumber, []any, *jsonObject.

type jsonObject struct {
	keys []string
	vals []any
}

func (o *jsonObject) get(k string) (any, bool) {
	for i, kk := range o.keys {
		if kk == k {
			return o.vals[i], true
		}
	}
	return nil, false
}

func (o *jsonObject) getNum(k string) (int64, bool) {
	v, ok := o.get(k)
	if !ok {
		return 0, false
	}
	n, ok := v.(jsonNumber)
	if !ok || !n.isInt {
		return 0, false
	}
	return n.i, true
}

func (o *jsonObject) getIntList(k string) ([]int, bool) {
	v, ok := o.get(k)
	if !ok {
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]int, 0, len(l))
	for _, x := range l {
		n, ok := x.(jsonNumber)
		if !ok || !n.isInt {
			return nil, false
		}
		out = append(out, int(n.i))
	}
	return out, true
}

type jsonNumber struct {
	i     int64
	f     float64
	isInt bool
}

var errJSON = errors.New("invalid JSON")

type jsonParser struct {
	b     []byte
	i     int
	depth int
}

func parseJSON(b []byte) (any, error) {
	p := &jsonParser{b: b}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.b) {
		return nil, p.err("trailing data")
	}
	return v, nil
}

func (p *jsonParser) err(what string) error {
	return errors.Join(errJSON, errors.New(what+" at byte "+strconv.Itoa(p.i)))
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, error) {
	p.ws()
	if p.i >= len(p.b) {
		return nil, p.err("unexpected end")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.str()
	case c == 't':
		return true, p.lit("true")
	case c == 'f':
		return false, p.lit("false")
	case c == 'n':
		return nil, p.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return p.num()
	}
	return nil, p.err("unexpected character")
}

func (p *jsonParser) lit(s string) error {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return p.err("bad literal")
	}
	p.i += len(s)
	return nil
}

func (p *jsonParser) object() (any, error) {
	if p.depth++; p.depth > 64 {
		return nil, p.err("nesting too deep")
	}
	defer func() { p.depth-- }()
	p.i++
	o := &jsonObject{}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return o, nil
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.err("expected key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.err("expected ':'")
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		o.keys = append(o.keys, k)
		o.vals = append(o.vals, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.err("unterminated object")
		}
		if p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.b[p.i] == '}' {
			p.i++
			return o, nil
		}
		return nil, p.err("expected ',' or '}'")
	}
}

func (p *jsonParser) array() (any, error) {
	if p.depth++; p.depth > 64 {
		return nil, p.err("nesting too deep")
	}
	defer func() { p.depth-- }()
	p.i++
	var l []any
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return []any{}, nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		l = append(l, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, p.err("unterminated array")
		}
		if p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.b[p.i] == ']' {
			p.i++
			return l, nil
		}
		return nil, p.err("expected ',' or ']'")
	}
}

func (p *jsonParser) num() (any, error) {
	start := p.i
	isInt := true
	if p.b[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c >= '0' && c <= '9' {
			p.i++
		} else if c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' {
			isInt = false
			p.i++
		} else {
			break
		}
	}
	s := string(p.b[start:p.i])
	if isInt {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return jsonNumber{i: v, f: float64(v), isInt: true}, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, p.err("bad number")
	}
	return jsonNumber{f: f}, nil
}

func hexv(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func (p *jsonParser) u4() (rune, error) {
	if len(p.b)-p.i < 4 {
		return 0, p.err("short \\u escape")
	}
	var r rune
	for k := 0; k < 4; k++ {
		h := hexv(p.b[p.i+k])
		if h < 0 {
			return 0, p.err("bad \\u escape")
		}
		r = r<<4 | h
	}
	p.i += 4
	return r, nil
}

func (p *jsonParser) str() (string, error) {
	p.i++
	start := p.i
	// fast path: no escapes
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.i++
	}
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.err("control character in string")
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			break
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, err := p.u4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) && len(p.b)-p.i >= 6 && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
				save := p.i
				p.i += 2
				r2, err := p.u4()
				if err == nil {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						p.i = save
					}
				} else {
					p.i = save
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.err("bad escape")
		}
	}
	return "", p.err("unterminated string")
}
