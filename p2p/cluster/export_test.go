package cluster

// cutOff drops every packet and stream of the member, both ways: a partition on loopback.
func (c *Cluster) cutOff(on bool) { c.transport.cut.Store(on) }
