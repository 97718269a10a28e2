# Sourced by the server benchmarks: wait_port PORT [TRIES] waits (0.1 s per try, default
# 300) until something accepts on 127.0.0.1:PORT, else names the port and exits.
wait_port() {
    for _ in $(seq "${2:-300}"); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "${0##*/}: nothing listens on port $1" >&2
    exit 1
}
