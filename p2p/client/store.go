package client

import (
	"context"
	"errors"

	"github.com/rbctl/rbctl/p2p/p2ppb"
)

// Why Store did not store a payload.
var (
	ErrPresent = errors.New("the key is already stored on the node (not rewritten)")
	ErrFull    = errors.New("not stored: the node's cache is full")
)

// Store puts payload under key and says why the node did not store it: ErrPresent when it
// already holds the key, ErrFull when it had no room.
func (c *Client) Store(ctx context.Context, key *p2ppb.ObjectKey, payload []byte) error {
	stored, present, err := c.Put(ctx, key, payload)
	switch {
	case err != nil || stored:
		return err
	case present:
		return ErrPresent
	}
	return ErrFull
}
