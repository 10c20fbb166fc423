package sluicerueidis_test

import "net"

func netDialer() net.Dialer { return net.Dialer{Timeout: dialTimeout} }
