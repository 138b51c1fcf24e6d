package workloads

import (
	"errors"
	"strings"
	"testing"
)

func TestModelConfig(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		bpt          int
	}{
		// Llama-3-8B: 2 × 32 × 8 × (4096/32) × 2.
		{"llama3-8b", `{"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"}`, 128 << 10},
		// No num_key_value_heads: multi-head attention; float32.
		{"mha-fp32", `{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "torch_dtype": "float32"}`, 2 * 2 * 4 * 64 * 4},
		// head_dim given apart from hidden_size (Qwen3, Gemma).
		{"head-dim", `{"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 2560}`, 2 * 36 * 8 * 128 * 2},
		// DeepSeek-V3: 61 layers × (512 + 64) × 2, no factor 2.
		{"deepseek-v3", `{"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16"}`, 61 * 576 * 2},
		{"wrapped", `{"torch_dtype": "bfloat16", "text_config": {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}}`, 2 * 4 * 8 * 64 * 2},
	} {
		m, err := ParseModelConfig(strings.NewReader(tc.config))
		if err != nil || m.BytesPerToken() != tc.bpt {
			t.Errorf("%s: %d bytes per token, want %d (%v)", tc.name, m.BytesPerToken(), tc.bpt, err)
		}
	}
	if m, _ := LookupModel("deepseek-v3"); m.BytesPerToken() != 61*576*2 {
		t.Errorf("deepseek-v3 preset: %d", m.BytesPerToken())
	}
	for _, bad := range []string{`{}`, `[`, `{"num_hidden_layers": 2}`, `{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256, "torch_dtype": "int3"}`,
		`{"num_hidden_layers": 99999999, "num_attention_heads": 4, "hidden_size": 256}`} {
		if _, err := ParseModelConfig(strings.NewReader(bad)); !errors.Is(err, ErrSpec) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func FuzzModelConfig(f *testing.F) {
	f.Add([]byte(`{"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseModelConfig(strings.NewReader(string(b)))
		if err == nil && (m.BytesPerToken() <= 0 || m.BytesPerToken() > 1<<30) {
			t.Fatalf("%d bytes per token from %s", m.BytesPerToken(), b)
		}
	})
}
