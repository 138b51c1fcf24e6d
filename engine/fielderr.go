package engine

import (
	"fmt"
	"strings"
)

// FieldError is an engine error about named config fields, in LMCache's spelling
// (slot_bytes, meta_total_bytes, block_align, header_bytes, capacity_bytes, namespace):
// errors.Is finds its kind (ErrConfig, ErrLayoutMismatch, ErrDeviceTooSmall,
// ErrCheckpointTooBig), and errors.As gives the fields, so that a caller can say which of
// its own options set them without reading the message.
type FieldError struct {
	Kind   error
	Fields []string
	Detail string // the message after the kind's
}

func (e *FieldError) Error() string { return e.Kind.Error() + ": " + e.Detail }
func (e *FieldError) Unwrap() error { return e.Kind }

// fieldErr builds a FieldError with the formatted detail.
func fieldErr(kind error, fields []string, format string, a ...any) error {
	return &FieldError{Kind: kind, Fields: fields, Detail: fmt.Sprintf(format, a...)}
}

// Has says whether the error names field.
func (e *FieldError) Has(field string) bool {
	for _, f := range e.Fields {
		if f == field {
			return true
		}
	}
	return false
}

// configField is the LMCache name in a cfgErr field label: "SlotBytes (slot_bytes)" →
// slot_bytes, "Namespace" → namespace, "QueueDepth" → "" (no LMCache name).
func configField(label string) string {
	if _, rest, ok := strings.Cut(label, "("); ok {
		return strings.TrimSuffix(rest, ")")
	}
	if label == "Namespace" {
		return "namespace"
	}
	return ""
}
