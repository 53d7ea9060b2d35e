// A real OpenAI client against a running prefixd: what the official
// `openai` npm package parses from completions, chat, streaming chat,
// n = 2, logprobs, and error responses. scripts/openai-client-test.sh
// installs the package, starts the server and runs this with
// PREFIXD_URL, PREFIXD_MODEL, PREFIXD_KEY and OPENAI_MODULE (the package's
// directory) set.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(process.env.OPENAI_MODULE + '/');
const mod = require('openai');
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const model = process.env.PREFIXD_MODEL;
const client = new OpenAI({ baseURL: process.env.PREFIXD_URL + '/v1', apiKey: process.env.PREFIXD_KEY, maxRetries: 0 });

let passed = 0;
async function check(name, fn) {
  await fn();
  passed++;
  console.log('ok  ', name);
}

const user1 = 'I am planning a long trip through the mountains of Norway next summer, with a tent and a small stove.';

await check('models.list', async () => {
  const page = await client.models.list();
  assert.ok(page.data.some((m) => m.id === model), `model ${model} listed`);
});

await check('completions', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 5, seed: 1 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 5);
});

await check('completions logprobs', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, logprobs: 2, seed: 2 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, 4);
  assert.equal(lp.token_logprobs.length, 4);
  for (const [i, v] of lp.token_logprobs.entries()) {
    assert.ok(v <= 0, `logprob ${v} <= 0`);
    assert.ok(Object.keys(lp.top_logprobs[i]).length >= 1);
  }
});

let reply1, usage1;
await check('chat', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: user1 }], max_tokens: 6, temperature: 0, user: 'client-test',
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
  reply1 = r.choices[0].message.content;
  usage1 = r.usage;
});

await check('chat second turn hits the prefix cache', async () => {
  const r = await client.chat.completions.create({
    model, max_tokens: 3, temperature: 0,
    messages: [{ role: 'user', content: user1 }, { role: 'assistant', content: reply1 }, { role: 'user', content: 'What should I pack?' }],
  });
  assert.ok(r.usage.prompt_tokens > usage1.prompt_tokens);
  assert.ok(r.usage.prompt_tokens_details.cached_tokens > 0, `cached_tokens ${r.usage.prompt_tokens_details.cached_tokens}`);
});

await check('streaming chat', async () => {
  const params = { model, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 6, seed: 5 };
  const whole = await client.chat.completions.create(params);
  const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '', role = null, finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) {
        assert.equal(chunks, 1, 'the role comes first');
        role = c.delta.role;
      }
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(role, 'assistant');
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

await check('chat n = 2', async () => {
  const r = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, n: 2, seed: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.equal(r.usage.completion_tokens, 8);
});

await check('chat logprobs', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, logprobs: true, top_logprobs: 2, seed: 4,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
    assert.ok(Array.isArray(e.bytes));
  }
});

await check('structured output: response_format json_schema', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Who?' }], max_tokens: 60, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'p', strict: true, schema: {
      type: 'object', properties: { name: { type: 'string', maxLength: 6 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
      required: ['name', 'age'], additionalProperties: false } } },
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  const v = JSON.parse(r.choices[0].message.content);
  assert.equal(typeof v.name, 'string');
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 99);
});

await check('forced tool call', async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 60, seed: 1,
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: {
      type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'] } } }],
    tool_choice: 'required',
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
  assert.equal(typeof JSON.parse(c.message.tool_calls[0].function.arguments).city, 'string');
});

await check('predicted output: usage counts the prediction', async () => {
  const prediction = 'Once upon a time there was a little dragon who lived in a cave by the sea.';
  const r = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Tell me a story.' }], max_tokens: 24, temperature: 0,
    prediction: { type: 'content', content: prediction },
  });
  const d = r.usage.completion_tokens_details;
  assert.ok(d, 'usage.completion_tokens_details is missing');
  assert.equal(typeof d.accepted_prediction_tokens, 'number');
  assert.equal(typeof d.rejected_prediction_tokens, 'number');
  assert.ok(d.accepted_prediction_tokens + d.rejected_prediction_tokens > 0, 'the prediction was not counted');
});

await check('error: unsupported field', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Hi' }],
      service_tier: 'flex',
    }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError, `an APIError, got ${err}`);
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.status, 400);
      assert.match(err.message, /"service_tier" is not supported/);
      assert.equal(err.param, 'service_tier');
      return true;
    },
  );
});

await check('error: unknown model', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-9', messages: [{ role: 'user', content: 'Hi' }] }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.status, 404);
    assert.match(err.message, /model gpt-9 does not exist/);
    return true;
  });
});

await check('error: bad API key', async () => {
  const bad = new OpenAI({ baseURL: process.env.PREFIXD_URL + '/v1', apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError);
    assert.equal(err.status, 401);
    return true;
  });
});

const { version } = JSON.parse(readFileSync(process.env.OPENAI_MODULE + '/node_modules/openai/package.json', 'utf8'));
console.log(`${passed} checks passed (openai ${version}, node ${process.version})`);
