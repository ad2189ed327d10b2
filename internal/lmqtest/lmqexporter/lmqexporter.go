// Package lmqexporter holds the shape in which existing LMQ exporters decode
// the gateway's /stats, for the tests of /stats (ops, against the handler,
// and e2e, against the binary): both must keep those exporters working, so
// they decode into the one shape, and a field an exporter reads is added
// here once.
package lmqexporter

// Stats is shaped like the structs existing LMQ exporters decode /stats
// into: they read the nodes, each queue's size, memory and properties, the
// push count and one-minute rate, the pull count and the retention's min,
// max, mean, median and sample count. A value of another JSON type than
// LMQ printed fails the decoding, as it would in an exporter.
type Stats struct {
	ActiveNodes []string `json:"active_nodes"`
	AllNodes    []string `json:"all_nodes"`
	Queues      map[string]struct {
		Size   int64 `json:"size"`
		Memory int64 `json:"memory"`
		Stats  struct {
			Push struct {
				Count int64   `json:"count"`
				One   float64 `json:"one"`
			} `json:"push"`
			Pull struct {
				Count int64 `json:"count"`
			} `json:"pull"`
			Retention struct {
				Min            float64 `json:"min"`
				Max            float64 `json:"max"`
				ArithmeticMean float64 `json:"arithmetic_mean"`
				Median         float64 `json:"median"`
				N              int     `json:"n"`
			} `json:"retention"`
		} `json:"stats"`
		Props map[string]any `json:"props"`
	} `json:"queues"`
}
