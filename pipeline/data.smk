# Data: official download verified by checksum, or the same archive from a mirror (params `mirror` or
# $NLPBENCH_MIRROR). Files missing from a mirror are listed in STATUS.json and become "needs data" cells.

rule fetch_babi:
    output:
        "data/babi/STATUS.json",
    log:
        "logs/fetch_babi.log",
    shell:
        "nlpbench {SET} fetch babi > {log} 2>&1"
