-- dis-serve's request hold for haproxy (loaded by the balancer config render/balancer.py
-- writes; copied beside it in the run directory).
--
-- While no frontend of the backend can route the graph's model (starting, restarting, just
-- died), haproxy sends requests to the backend's backup server, a listener of haproxy's own
-- whose first rule is this action: it waits, polling the backend's servers, until one is up
-- or `hold_ms` has passed, and records which in txn.routable; the listener then forwards the
-- request to the backend, or answers 503 when none came up. A client sees a slower answer
-- instead of a refused connection, an HTTP 404 (a frontend that has not discovered the
-- model) or a 503.

local POLL_MS = 50

local function now_ms()
  local now = core.now()
  return now.sec * 1000 + now.usec // 1000
end

-- An active (not backup) server whose health check passes: UP, or UP and going down
-- ("UP 1/2": one failed check of the two that mark it down).
local function routable(backend)
  for _, server in pairs(core.backends[backend].servers) do
    local stats = server:get_stats()
    if stats.bck == 0 and string.sub(stats.status, 1, 2) == "UP" then
      return true
    end
  end
  return false
end

core.register_action("hold_for_replica", {"http-req"}, function(txn, backend, hold_ms)
  local deadline = now_ms() + tonumber(hold_ms)
  while not routable(backend) and now_ms() < deadline do
    core.msleep(POLL_MS)
  end
  txn:set_var("txn.routable", routable(backend))
end, 2)
