package workloads

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// hfConfig is what KV sizing needs of a Hugging Face config.json.
type hfConfig struct {
	Name       string    `json:"_name_or_path"`
	ModelType  string    `json:"model_type"`
	Layers     int       `json:"num_hidden_layers"`
	Heads      int       `json:"num_attention_heads"`
	KVHeads    int       `json:"num_key_value_heads"`
	HeadDim    int       `json:"head_dim"`
	Hidden     int       `json:"hidden_size"`
	DType      string    `json:"torch_dtype"`
	KVLoraRank int       `json:"kv_lora_rank"`
	QKRopeDim  int       `json:"qk_rope_head_dim"`
	TextConfig *hfConfig `json:"text_config"` // multimodal wrappers keep the LM's here
}

var dtypeBytes = map[string]int{
	"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
	"float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "": 2,
}

// ParseModelConfig reads the KV footprint of a model from its Hugging Face config.json:
// 2 × num_hidden_layers × num_key_value_heads (default num_attention_heads) × head_dim
// (default hidden_size / num_attention_heads) × bytes of torch_dtype (bf16 when absent);
// an MLA model (kv_lora_rank set: DeepSeek-V2/V3) stores one latent of kv_lora_rank +
// qk_rope_head_dim per layer and token instead.
func ParseModelConfig(r io.Reader) (ModelPreset, error) {
	var c hfConfig
	if err := json.NewDecoder(io.LimitReader(r, 16<<20)).Decode(&c); err != nil {
		return ModelPreset{}, fmt.Errorf("%w: model config: %v", ErrSpec, err)
	}
	if c.Layers == 0 && c.TextConfig != nil {
		dt := c.DType
		c = *c.TextConfig
		if c.DType == "" {
			c.DType = dt
		}
	}
	eb, ok := dtypeBytes[c.DType]
	if !ok {
		return ModelPreset{}, fmt.Errorf("%w: model config: unknown torch_dtype %q", ErrSpec, c.DType)
	}
	name := c.Name
	if name == "" {
		name = c.ModelType
	}
	m := ModelPreset{Name: name, Layers: c.Layers, ElemBytes: eb}
	const most = 1 << 16
	switch {
	case c.Layers <= 0 || c.Layers > most:
		return m, fmt.Errorf("%w: model config: num_hidden_layers %d", ErrSpec, c.Layers)
	case c.KVLoraRank > 0:
		if c.KVLoraRank > most || c.QKRopeDim < 0 || c.QKRopeDim > most {
			return m, fmt.Errorf("%w: model config: kv_lora_rank %d, qk_rope_head_dim %d", ErrSpec, c.KVLoraRank, c.QKRopeDim)
		}
		m.Latent = c.KVLoraRank + c.QKRopeDim
	default:
		m.KVHeads = c.KVHeads
		if m.KVHeads == 0 {
			m.KVHeads = c.Heads
		}
		m.HeadDim = c.HeadDim
		if m.HeadDim == 0 && c.Heads > 0 {
			m.HeadDim = c.Hidden / c.Heads
		}
		if m.KVHeads <= 0 || m.KVHeads > most || m.HeadDim <= 0 || m.HeadDim > most {
			return m, fmt.Errorf("%w: model config: %d KV heads of dimension %d (num_key_value_heads, num_attention_heads, head_dim, hidden_size)", ErrSpec, m.KVHeads, m.HeadDim)
		}
	}
	if bpt := int64(m.BytesPerToken()); bpt > 1<<30 {
		return m, fmt.Errorf("%w: model config: %d KV bytes per token", ErrSpec, bpt)
	}
	return m, nil
}

// LoadModelConfig reads ParseModelConfig from a file.
func LoadModelConfig(path string) (ModelPreset, error) {
	f, err := os.Open(path)
	if err != nil {
		return ModelPreset{}, err
	}
	defer f.Close()
	m, err := ParseModelConfig(f)
	if err != nil {
		return m, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
