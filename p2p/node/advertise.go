package node

import (
	"net"
)

// advertise returns the control and data addresses peers dial for listeners bound at
// ctl and data: with adv (HOST:PORT) the control plane is adv and the data plane the same
// host at its bound port; without it each bound address, an unspecified host (0.0.0.0, ::)
// replaced by the outbound interface's address (a listener on every address is not an
// address anyone can dial: peers would dial themselves).
func advertise(ctl, data, adv string) (string, string) {
	if adv != "" {
		host, _, _ := net.SplitHostPort(adv)
		_, dport, _ := net.SplitHostPort(data)
		return adv, net.JoinHostPort(host, dport)
	}
	return Dialable(ctl), Dialable(data)
}

// Dialable replaces an unspecified host in a bound host:port by OutboundIP.
func Dialable(bound string) string {
	h, p, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
		return bound
	}
	return net.JoinHostPort(OutboundIP().String(), p)
}

// OutboundIP is this host's address on the route to the outside (a UDP socket's local
// address after connect, which sends nothing); without such a route the first address of
// an interface that is up and not loopback; else 127.0.0.1.
func OutboundIP() net.IP {
	for _, probe := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} { // documentation ranges
		if c, err := net.Dial("udp", probe); err == nil {
			ip := c.LocalAddr().(*net.UDPAddr).IP
			c.Close()
			if !ip.IsLoopback() && !ip.IsUnspecified() {
				return ip
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP
			}
		}
	}
	return net.IPv4(127, 0, 0, 1)
}
