// The oracle of Trainer v2.2.1: the shared command line (trainguard.local/oracle/common) with the
// runtimePatches release line's plugin (trainguard.local/oracle/runtimepatches), linked against
// this tag's Trainer.
package main

import (
	oracle "trainguard.local/oracle/common"
	"trainguard.local/oracle/runtimepatches"
)

func main() {
	oracle.Main(runtimepatches.Release())
}
