"""BullMQ queues from blocking code: the job operations a step worker needs, as our own Lua.

BullMQ (the Node library the nestjs-durable engine uses) keeps a queue ``Q`` under
``bull:Q:*``: ``wait`` (list, LPUSH in, RPOPLPUSH out), ``prioritized`` (zset), ``active``
(list), ``marker`` (zset a blocked worker BZPOPMINs on), ``meta`` (hash; ``paused``,
``opts.maxLenEvents``), ``id`` (counter), ``events`` (stream), ``stalled`` (set),
``stalled-check`` (mutex key), ``completed`` / ``failed`` (zsets by finish time) and one hash
per job ``bull:Q:<id>`` (``name``, ``data`` JSON, ``opts`` JSON, ``timestamp``, ``processedOn``,
``ats``, ``stc``, ``defa``...) with its lock ``bull:Q:<id>:lock`` (the owner's token, PX ttl).

That key layout is what Node BullMQ 5 workers and queues read and write; its Lua scripts are an
internal ABI that changes between releases (argument packing, key counts), so this module
implements the five operations below against the layout itself, each atomic in one script:

* :meth:`BullQueue.fetch` -- move the next job (wait, then prioritized) to active, lock it,
  stamp ``processedOn`` / ``pb`` / ``ats``, emit ``active``; re-arm the marker when more wait.
* :meth:`BullQueue.extend_lock` -- renew a held lock and take the job off the stalled set.
* :meth:`BullQueue.finish` -- release the lock and complete or fail the job honouring its
  ``removeOnComplete`` / ``removeOnFail`` (``true``, a count, or ``{age, count}``).
* :meth:`BullQueue.check_stalled` -- BullMQ 5's stalled check: an active job whose lock expired
  since the last check goes back to wait (``stalled`` event, ``stc`` + 1); past
  ``maxStalledCount`` it is marked ``defa`` (deferred failure) and fails on its next fetch.
* :meth:`BullQueue.add` -- a standard job exactly as ``Queue.add`` stores it (FIFO, no delay).

Plus :meth:`BullQueue.release` (give a held job back to wait at once, for a cold stop). Delayed
jobs, rate limits, flows and repeatable jobs are not used by the engine's step queues and are
left alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["BullJob", "BullQueue", "wait_for_marker"]

_FETCH = """
local rcall = redis.call
if rcall("HEXISTS", KEYS[5], "paused") == 1 then return false end
local jobId = rcall("RPOPLPUSH", KEYS[1], KEYS[2])
if jobId and string.sub(jobId, 1, 2) == "0:" then
  rcall("LREM", KEYS[2], 1, jobId)
  jobId = rcall("RPOPLPUSH", KEYS[1], KEYS[2])
end
if not jobId then
  local popped = rcall("ZPOPMIN", KEYS[3])
  if #popped == 0 then
    rcall("DEL", KEYS[6])
    return false
  end
  jobId = popped[1]
  rcall("LPUSH", KEYS[2], jobId)
end
local jobKey = ARGV[1] .. jobId
rcall("SET", jobKey .. ":lock", ARGV[3], "PX", ARGV[4])
rcall("XADD", KEYS[4], "*", "event", "active", "jobId", jobId, "prev", "waiting")
rcall("HSET", jobKey, "processedOn", ARGV[2], "pb", ARGV[5])
rcall("HINCRBY", jobKey, "ats", 1)
if rcall("LLEN", KEYS[1]) > 0 or rcall("ZCARD", KEYS[3]) > 0 then
  rcall("ZADD", KEYS[7], 0, "0")
end
return {jobId, rcall("HGETALL", jobKey)}
"""

_EXTEND = """
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
  redis.call("SREM", KEYS[2], ARGV[3])
  return 1
end
return 0
"""

_FINISH = """
local rcall = redis.call
local jobId, jobKey = ARGV[1], KEYS[6]
local function removeJob(id)
  local key = ARGV[6] .. id
  rcall("DEL", key, key .. ":logs", key .. ":dependencies", key .. ":processed", key .. ":failed",
        key .. ":unsuccessful")
end
if rcall("EXISTS", jobKey) == 0 then return -1 end
local owner = rcall("GET", jobKey .. ":lock")
if owner ~= ARGV[2] then
  if not owner then return -2 end
  return -6
end
rcall("DEL", jobKey .. ":lock")
rcall("SREM", KEYS[2], jobId)
if rcall("LREM", KEYS[1], -1, jobId) == 0 then return -3 end
local completed = ARGV[4] == "completed"
local ok, opts = pcall(cjson.decode, rcall("HGET", jobKey, "opts") or "{}")
if not ok or type(opts) ~= "table" then opts = {} end
local keep
if completed then keep = opts["removeOnComplete"] else keep = opts["removeOnFail"] end
local maxEvents = rcall("HGET", KEYS[4], "opts.maxLenEvents") or 10000
if keep == true then
  removeJob(jobId)
else
  rcall("ZADD", KEYS[5], ARGV[3], jobId)
  if completed then
    rcall("HSET", jobKey, "returnvalue", ARGV[5], "finishedOn", ARGV[3])
  else
    rcall("HSET", jobKey, "failedReason", ARGV[5], "finishedOn", ARGV[3])
  end
  local maxAge, maxCount
  if type(keep) == "number" then maxCount = keep end
  if type(keep) == "table" then maxAge = tonumber(keep["age"]); maxCount = tonumber(keep["count"]) end
  if maxAge then
    local old = rcall("ZRANGEBYSCORE", KEYS[5], "-inf", tonumber(ARGV[3]) - maxAge * 1000, "LIMIT", 0, 1000)
    for _, id in ipairs(old) do removeJob(id); rcall("ZREM", KEYS[5], id) end
  end
  if maxCount and maxCount >= 0 then
    local extra = rcall("ZREVRANGE", KEYS[5], maxCount, maxCount + 999)
    for _, id in ipairs(extra) do removeJob(id); rcall("ZREM", KEYS[5], id) end
  end
end
if completed then
  rcall("XADD", KEYS[3], "MAXLEN", "~", maxEvents, "*", "event", "completed", "jobId", jobId,
        "returnvalue", ARGV[5], "prev", "active")
else
  rcall("XADD", KEYS[3], "MAXLEN", "~", maxEvents, "*", "event", "failed", "jobId", jobId,
        "failedReason", ARGV[5], "prev", "active")
end
return 0
"""

_STALLED = """
local rcall = redis.call
if rcall("EXISTS", KEYS[4]) == 1 then return {} end
rcall("SET", KEYS[4], ARGV[3], "PX", ARGV[4])
local target, paused = KEYS[2], rcall("HEXISTS", KEYS[5], "paused") == 1
if paused then target = KEYS[6] end
local stalled = {}
local stalling = rcall("SMEMBERS", KEYS[1])
if #stalling > 0 then
  rcall("DEL", KEYS[1])
  for _, jobId in ipairs(stalling) do
    if string.sub(jobId, 1, 2) == "0:" then
      rcall("LREM", KEYS[3], 1, jobId)
    else
      local jobKey = ARGV[2] .. jobId
      if rcall("EXISTS", jobKey .. ":lock") == 0 and rcall("LREM", KEYS[3], 1, jobId) > 0 then
        local count = rcall("HINCRBY", jobKey, "stc", 1)
        if count > tonumber(ARGV[1]) then
          rcall("HSET", jobKey, "defa", "job stalled more than allowable limit")
        end
        rcall("RPUSH", target, jobId)
        if not paused then rcall("ZADD", KEYS[7], 0, "0") end
        rcall("XADD", KEYS[8], "*", "event", "waiting", "jobId", jobId, "prev", "active")
        rcall("XADD", KEYS[8], "*", "event", "stalled", "jobId", jobId)
        table.insert(stalled, jobId)
      end
    end
  end
end
local active = rcall("LRANGE", KEYS[3], 0, -1)
for i = 1, #active, 5000 do
  rcall("SADD", KEYS[1], unpack(active, i, math.min(i + 4999, #active)))
end
return stalled
"""

_ADD = """
local rcall = redis.call
local jobId = rcall("INCR", KEYS[4]) .. ""
local jobKey = ARGV[1] .. jobId
local maxEvents = rcall("HGET", KEYS[3], "opts.maxLenEvents")
if not maxEvents then
  maxEvents = 10000
  rcall("HSET", KEYS[3], "opts.maxLenEvents", maxEvents)
end
rcall("HSET", jobKey, "name", ARGV[2], "data", ARGV[4], "opts", ARGV[5], "timestamp", ARGV[3],
      "delay", 0, "priority", 0)
rcall("XADD", KEYS[5], "*", "event", "added", "jobId", jobId, "name", ARGV[2])
if rcall("HEXISTS", KEYS[3], "paused") == 1 then
  rcall("LPUSH", KEYS[2], jobId)
else
  rcall("LPUSH", KEYS[1], jobId)
  rcall("ZADD", KEYS[6], 0, "0")
end
rcall("XADD", KEYS[5], "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", jobId)
return jobId
"""

_RELEASE = """
local rcall = redis.call
if rcall("GET", KEYS[8]) ~= ARGV[2] then return 0 end
rcall("DEL", KEYS[8])
rcall("SREM", KEYS[3], ARGV[1])
if rcall("LREM", KEYS[1], 1, ARGV[1]) == 0 then return 0 end
if rcall("HEXISTS", KEYS[6], "paused") == 1 then
  rcall("RPUSH", KEYS[7], ARGV[1])
else
  rcall("RPUSH", KEYS[2], ARGV[1])
  rcall("ZADD", KEYS[5], 0, "0")
end
rcall("XADD", KEYS[4], "*", "event", "waiting", "jobId", ARGV[1], "prev", "active")
return 1
"""


@dataclass
class BullJob:
    """One job moved to active by :meth:`BullQueue.fetch` and locked with ``token``."""

    queue: BullQueue
    id: str
    token: str
    name: str
    data: Any
    fields: Dict[str, str] = field(repr=False)

    @property
    def deferred_failure(self) -> Optional[str]:
        """BullMQ's ``defa``: the stalled check gave up on this job; fail it instead of running it."""
        return self.fields.get("defa")


class BullQueue:
    """One BullMQ queue on a synchronous ``redis.Redis`` client (``decode_responses=True``)."""

    #: Script objects by source (their SHA); always called with an explicit client.
    _scripts: Dict[str, Any] = {}

    def __init__(self, redis: Any, name: str, *, key_prefix: str = "bull") -> None:
        self.redis = redis
        self.name = name
        self.base = f"{key_prefix}:{name}:"

    def key(self, part: str) -> str:
        return self.base + part

    def _run(self, source: str, keys: Sequence[str], args: Sequence[Any], pipe: Any = None) -> Any:
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.redis.register_script(source)
        return script(keys=list(keys), args=list(args), client=pipe if pipe is not None else self.redis)

    # -- consuming ------------------------------------------------------------------------------

    def fetch(self, token: str, lock_ms: int, worker_name: str, now_ms: int) -> Optional[BullJob]:
        """The next job, moved to active and locked; ``None`` when there is none (or paused)."""
        k = self.key
        reply = self._run(_FETCH, [k("wait"), k("active"), k("prioritized"), k("events"), k("meta"),
                                   k("pc"), k("marker")],
                          [self.base, now_ms, token, lock_ms, worker_name])
        if not reply:
            return None
        job_id, flat = str(reply[0]), reply[1]
        fields = {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
        try:
            data = json.loads(fields.get("data", "null"))
        except ValueError:
            data = fields.get("data")
        return BullJob(self, job_id, token, fields.get("name", ""), data, fields)

    def extend_lock(self, job_id: str, token: str, lock_ms: int) -> bool:
        """Renew our lock on ``job_id``; False when it is no longer ours (expired, or re-taken)."""
        return bool(self._run(_EXTEND, [self.key(f"{job_id}:lock"), self.key("stalled")],
                              [token, lock_ms, job_id]))

    def finish(self, job_id: str, token: str, *, completed: bool, value: str, now_ms: int, pipe: Any = None) -> Any:
        """Complete (or fail) a job we hold: 0 done, -1 job gone, -2 lock gone, -6 not our lock, -3 not active.

        With ``pipe`` (a pipeline) the call is queued there and its reply comes from ``execute()``.
        """
        k = self.key
        target = k("completed") if completed else k("failed")
        reply = self._run(_FINISH, [k("active"), k("stalled"), k("events"), k("meta"), target, k(job_id)],
                          [job_id, token, now_ms, "completed" if completed else "failed", value, self.base], pipe)
        return reply if pipe is not None else int(reply)

    def release(self, job_id: str, token: str) -> bool:
        """Put a job we hold back at the head of wait (a cold stop); False when it was not ours."""
        k = self.key
        return bool(self._run(_RELEASE, [k("active"), k("wait"), k("stalled"), k("events"), k("marker"),
                                         k("meta"), k("paused"), k(f"{job_id}:lock")], [job_id, token]))

    def check_stalled(self, max_stalled_count: int, interval_ms: int, now_ms: int) -> List[str]:
        """BullMQ's stalled check (at most once per ``interval_ms`` across every worker of the queue)."""
        k = self.key
        reply = self._run(_STALLED, [k("stalled"), k("wait"), k("active"), k("stalled-check"), k("meta"),
                                     k("paused"), k("marker"), k("events")],
                          [max_stalled_count, self.base, now_ms, interval_ms])
        return [str(job_id) for job_id in reply or []]

    # -- producing -------------------------------------------------------------------------------

    def add(self, name: str, data: str, opts: Dict[str, Any], now_ms: int, pipe: Any = None) -> Any:
        """Add a standard job (``data`` is already JSON); returns its id (queued on ``pipe`` if given)."""
        k = self.key
        full_opts = {"attempts": 0, **opts}
        reply = self._run(_ADD, [k("wait"), k("paused"), k("meta"), k("id"), k("events"), k("marker")],
                          [self.base, name, now_ms, data, json.dumps(full_opts, separators=(",", ":"))], pipe)
        return reply if pipe is not None else str(reply)


def wait_for_marker(redis: Any, queues: Sequence[BullQueue], timeout: float) -> Optional[str]:
    """Block up to ``timeout`` s on the queues' markers (one BZPOPMIN); the woken queue's name."""
    if not queues:
        return None
    reply = redis.bzpopmin([q.key("marker") for q in queues], timeout=max(0.01, timeout))
    if not reply:
        return None
    marker = str(reply[0])
    for queue in queues:
        if queue.key("marker") == marker:
            return queue.name
    return None
