-- wrk script of `scripts/bench --parts http`: every request a new one-file manifest.
-- Each wrk thread sends to its own partition (its id, from LAKEGATE_BENCH_FIRST_PARTITION on:
-- one range per run), offsets continuing, so every file is
-- accepted (never a duplicate) and the table's buffer grows as it would under real sidecars.
local token = os.getenv("LAKEGATE_BENCH_TOKEN")
local root = os.getenv("LAKEGATE_BENCH_ROOT")
local next_id = tonumber(os.getenv("LAKEGATE_BENCH_FIRST_PARTITION") or "0")

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  counter = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. token
end

function request()
  local start = counter * 10
  counter = counter + 1
  local body = string.format(
    '{"manifest_id":"b-%d-%d","sidecar":{"id":"bench-%d","worker":"bench:8083"},' ..
    '"files":[{"path":"%s/bench-%d-%d","topic":"bench","partition":%d,' ..
    '"start_offset":%d,"end_offset":%d,"size_bytes":1000,"format":"parquet"}]}',
    id, counter, id, root, id, start, id, start, start + 9)
  return wrk.format(nil, "/v1/manifests", nil, body)
end
