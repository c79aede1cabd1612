"""The nightly loop (`mibench nightly`, docs/nightly.md): run the config at HEAD, judge the
run against the history folder (`judge`), confirm each suspicion with interleaved `ab`
and bisect a confirmed one to its commit (`loop`, through the `steps` seam), keep the
folder's index (`index`), and write one summary of at most 40 lines (`summary`)."""
