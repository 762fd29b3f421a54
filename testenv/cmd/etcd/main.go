// Command etcd is upstream's etcd server, built from its Go module so that the
// end-to-end suite needs no download beyond the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
