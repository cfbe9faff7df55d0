package broker

import "net/netip"

var netipZero netip.AddrPort
