package server

import "net"

// Addrs are the addresses a server has bound, "" for a listener it does not
// have. With port 0 in a listen setting they carry the port the kernel
// picked, which is how a program that starts the gateway (a test, a
// supervisor) learns it without ever holding a port it then hands on.
type Addrs struct {
	HTTP  string `json:"http,omitempty"`
	RPC   string `json:"rpc,omitempty"`
	Debug string `json:"debug,omitempty"`
	SQS   string `json:"sqs,omitempty"`
	// NATS and Cluster are the embedded server's client and route ports.
	NATS    string `json:"nats,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// Complete is false in the early report (Config.NATSBound) that holds
	// only the embedded server's ports, true once every listener is bound.
	Complete bool `json:"complete"`
}

// Addrs reports every address the server listens on; valid from New until
// Shutdown.
func (s *Server) Addrs() Addrs {
	a := s.natsAddrs()
	a.HTTP, a.RPC, a.Debug = addrString(s.HTTPAddr()), addrString(s.RPCAddr()), addrString(s.DebugAddr())
	a.SQS = addrString(s.SQSAddr())
	a.Complete = true
	return a
}

// natsAddrs are the embedded server's bound ports, none with Config.NATSURL.
func (s *Server) natsAddrs() Addrs {
	if s.ns == nil {
		return Addrs{}
	}
	return Addrs{NATS: s.ns.ClientAddr(), Cluster: s.ns.ClusterAddr()}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
