// The real nestjs-durable engine (npm @dudousxd/nestjs-durable-core) for the interop tests and
// the bench: one process, commands as JSON lines on stdin, one JSON answer line per command.
//
//   env ENGINE_TRANSPORT=redis  ENGINE_REDIS_URL=redis://127.0.0.1:56379/0  ENGINE_PREFIX=durable
//   env ENGINE_TRANSPORT=pg     ENGINE_PG_DSN=postgresql://...              ENGINE_PREFIX=durable
//   env ENGINE_TRANSPORT=sqs    ENGINE_SQS_ENDPOINT=http://127.0.0.1:PORT    ENGINE_PREFIX=durable (moto)
//
//   {"op":"start","runId":"r1","step":"payments.charge-card","input":{...},"retries":3,"backoff":100}
//   {"op":"wait","runId":"r1","timeoutMs":30000}  -> {"status","output","error","checkpoints":[...]}
//   {"op":"startMany","prefix":"b","count":200,"step":"bench.echo","input":{}}   (the bench)
//   {"op":"waitMany","prefix":"b","count":200,"timeoutMs":120000} -> {"completed","failed","ms"}
//   {"op":"remote","workflow":"pipeline","group":"py-workflows"}   engine.remote(): a Python-authored workflow
//   {"op":"startWorkflow","workflow":"pipeline","input":{...},"runId":"r2"}
//   {"op":"signal","token":"approve","payload":{...}}                  engine.signal()
//   {"op":"progress","runId":"r1"} -> {"events":[...]}  the step.progress events the engine relayed
//   {"op":"close"}
//   env ENGINE_TRANSPORT=mysql  ENGINE_MYSQL_URL=mysql://root@127.0.0.1:PORT/db  (typeorm + mysql2)
//   {"op":"serveTsSteps"}   (Redis) the engine's transport also serves the TypeScript steps `ts.greet`
//                           and `reports.render` (examples/nestjs_workflows.py)
import 'reflect-metadata';
import { createInterface } from 'node:readline';
import { WorkflowEngine, InMemoryStateStore, descriptorHash } from '@dudousxd/nestjs-durable-core';

const kind = process.env.ENGINE_TRANSPORT ?? 'redis';
const prefix = process.env.ENGINE_PREFIX ?? 'durable';

async function makeTransport() {
  if (kind === 'redis') {
    const { BullMQTransport } = await import('@dudousxd/nestjs-durable-transport-bullmq');
    const url = new URL(process.env.ENGINE_REDIS_URL ?? 'redis://127.0.0.1:6379/0');
    const db = Number((url.pathname || '/0').slice(1) || 0);
    return { transport: new BullMQTransport({ connection: { host: url.hostname, port: Number(url.port), db }, prefix }) };
  }
  if (kind === 'sqs') {
    const { SqsTransport } = await import('@dudousxd/nestjs-durable-transport-sqs');
    const { SQSClient } = await import('@aws-sdk/client-sqs');
    const client = new SQSClient({
      endpoint: process.env.ENGINE_SQS_ENDPOINT, region: process.env.AWS_REGION ?? 'us-east-1',
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
    return { transport: new SqsTransport({ client, prefix, autoCreate: true, waitTimeSeconds: 1 }), sqs: client };
  }
  const { DataSource } = await import('typeorm');
  const { DbTransport, typeOrmExecutor } = await import('@dudousxd/nestjs-durable-transport-db');
  const ds = kind === 'mysql'
    ? new DataSource({ type: 'mysql', url: process.env.ENGINE_MYSQL_URL })
    : new DataSource({ type: 'postgres', url: process.env.ENGINE_PG_DSN });
  await ds.initialize();
  return { transport: new DbTransport({ executor: typeOrmExecutor(ds), prefix, pollMs: 100 }), ds };
}

const { transport, ds, sqs } = await makeTransport();
const store = new InMemoryStateStore();
// The BullMQ transport is also the control plane: engine.cancel() publishes {kind:'cancel'} on <P>-control.
const engine = new WorkflowEngine({ store, transport, ...(kind === 'redis' ? { controlPlane: transport } : {}) });
const registered = new Set();
// step.progress events the engine relayed from the control channel, by run.
const progress = new Map();
engine.subscribe((event) => {
  if (event.type !== 'step.progress') return;
  if (!progress.has(event.runId)) progress.set(event.runId, []);
  progress.get(event.runId).push({ ...event, at: event.at instanceof Date ? event.at.getTime() : event.at });
});

function workflowFor(step, retries, backoff) {
  const name = `wf.${step}.${retries}.${backoff}`;
  if (!registered.has(name)) {
    engine.register(name, '1', async (ctx, input) => ctx.step(step, input, { retries, backoff }));
    registered.add(name);
  }
  return name;
}

// Retries with backoff only wake when someone resumes due timers (the in-memory store has no poller).
const timers = setInterval(() => { engine.resumeDueTimers().catch(() => {}); }, 100);

async function describe(runId) {
  const run = await store.getRun(runId);
  const checkpoints = (await store.listCheckpoints(runId)).sort((a, b) => a.seq - b.seq);
  // awaiting: the turn whose decision the run waits for (a remote workflow), else null
  return { status: run?.status, output: run?.output, error: run?.error, awaiting: run?.awaitingDecisionTaskId ?? null, checkpoints };
}

async function waitFor(runId, timeoutMs) {
  try {
    await engine.waitForRun(runId, { until: 'terminal', timeoutMs });
  } catch (err) {
    return { ...(await describe(runId)), timedOut: true, waitError: String(err?.message ?? err) };
  }
  return describe(runId);
}

async function handle(cmd) {
  switch (cmd.op) {
    case 'start': {
      const wf = workflowFor(cmd.step, cmd.retries ?? 1, cmd.backoff ?? 100);
      await engine.start(wf, cmd.input ?? {}, cmd.runId);
      return { ok: true };
    }
    case 'wait':
      return waitFor(cmd.runId, cmd.timeoutMs ?? 30000);
    case 'remote':
      if (!registered.has(`remote:${cmd.workflow}`)) {
        engine.remote(cmd.workflow, { group: cmd.group });
        registered.add(`remote:${cmd.workflow}`);
      }
      return { ok: true };
    case 'serveTsSteps':
      transport.handle('ts.greet', async (input) => ({ greeting: `hello ${input?.name ?? 'nobody'}`, by: 'typescript' }));
      transport.handle('reports.render', async (input) => ({ pages: Math.ceil((input?.rows ?? 0) / 50), by: 'typescript' }));
      return { ok: true };
    case 'startWorkflow':
      await engine.start(cmd.workflow, cmd.input ?? null, cmd.runId);
      return { ok: true };
    case 'signal':
      await engine.signal(cmd.token, cmd.payload ?? null);
      return { ok: true };
    case 'progress':
      return { events: progress.get(cmd.runId) ?? [] };
    case 'describe':
      return describe(cmd.runId);
    case 'cancel':
      return { ok: true, result: await engine.cancel(cmd.runId) };
    case 'workers': {
      // What the engine's control plane sees of live workers (BullMQ only): groups, beats, descriptors.
      const groups = await transport.listWorkerGroups();
      const live = await transport.listLiveWorkers(cmd.group);
      const descriptors = await transport.readWorkerDescriptors(cmd.group);
      const hashes = descriptors.map((d) => descriptorHash(d));
      const negotiation = descriptors.map((d) => transport.negotiateWith(d).outcome);
      const routing = await transport.resolveDispatch(cmd.group, []);
      return { groups, live, descriptors, hashes, negotiation, routing };
    }
    case 'startMany': {
      const wf = workflowFor(cmd.step, cmd.retries ?? 1, cmd.backoff ?? 100);
      const t0 = Date.now();
      await Promise.all(Array.from({ length: cmd.count }, (_, i) =>
        engine.start(wf, { ...(cmd.input ?? {}), i }, `${cmd.prefix}-${i}`)));
      return { ok: true, ms: Date.now() - t0 };
    }
    case 'waitMany': {
      const t0 = Date.now();
      const outcomes = await Promise.all(Array.from({ length: cmd.count }, (_, i) =>
        engine.waitForRun(`${cmd.prefix}-${i}`, { until: 'terminal', timeoutMs: cmd.timeoutMs ?? 120000 })
          .then((r) => r.status, () => 'timeout')));
      const count = (s) => outcomes.filter((o) => o === s).length;
      return { completed: count('completed'), failed: count('failed'), timeout: count('timeout'), ms: Date.now() - t0 };
    }
    case 'close':
      clearInterval(timers);
      await transport.close?.();
      await ds?.destroy();
      sqs?.destroy();
      return { ok: true, closing: true };
    default:
      return { error: `unknown op ${cmd.op}` };
  }
}

const rl = createInterface({ input: process.stdin });
process.stdout.write(JSON.stringify({ ready: true, transport: kind, prefix }) + '\n');
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = await handle(JSON.parse(line));
  } catch (err) {
    answer = { error: String(err?.stack ?? err) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
  if (answer.closing) break;
}
process.exit(0);
