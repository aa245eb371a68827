#!/bin/sh
# Test stand-in for TensorRT-LLM's trtllm-llmapi-launch (tests/integration/test_mpi_ranks.py),
# with its port race: every rank runs the command; rank 0 also finds the first free TCP port
# from 10012, closes it, and a second later binds it for as long as the command runs (the real
# launcher's export_free_tcp_addr_for_spawn_proxy_process, then its mgmn_leader_node). A port
# another leader took meanwhile fails the step, as it fails the real leader.
if [ "${SLURM_PROCID:-0}" != 0 ]; then exec "$@"; fi
port=$(python3 -c 'import socket
port = 10012
while True:
    s = socket.socket()
    try:
        s.bind(("", port))
        break
    except OSError:
        port += 1
    finally:
        s.close()
print(port)')
sleep 1
python3 -c 'import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
print("leader listens on", sys.argv[1], flush=True)
time.sleep(30)' "$port" &
leader=$!
sleep 0.5
kill -0 "$leader" 2>/dev/null || { echo "leader could not bind $port" >&2; exit 1; }
"$@"
status=$?
kill "$leader"
exit "$status"
