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
	// ErrDeclined: the node's admission policy (serve --admission) chose not to store it.
	ErrDeclined = errors.New("not stored: the node's admission policy declined it (a later get misses)")
)

// Store puts payload under key and says why the node did not store it: ErrPresent when it
// already holds the key, ErrDeclined when its admission policy chose not to store it,
// ErrFull when it had no room.
func (c *Client) Store(ctx context.Context, key *p2ppb.ObjectKey, payload []byte) error {
	o, err := c.Put(ctx, key, payload)
	switch {
	case err != nil || o.Stored:
		return err
	case o.Present:
		return ErrPresent
	case o.Declined:
		return ErrDeclined
	}
	return ErrFull
}
