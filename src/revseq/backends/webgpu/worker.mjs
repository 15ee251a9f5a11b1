// revseq's WebGPU worker: JSON requests on stdin, one a line; each answer a line of
// stdout after MARK (Dawn and onnxruntime may print their own lines there too).
import { create, globals } from 'webgpu';
import fs from 'node:fs';
import readline from 'node:readline';
Object.assign(globalThis, globals);
globalThis.navigator = { gpu: create([]) };
// Dawn's writeBuffer refuses views of a SharedArrayBuffer, which onnxruntime-web hands it.
const writeBuffer = GPUQueue.prototype.writeBuffer;
GPUQueue.prototype.writeBuffer = function (buffer, offset, data, ...rest) {
  if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
    data = new data.constructor(data.slice());
  }
  return writeBuffer.call(this, buffer, offset, data, ...rest);
};
const MARK = '@@revseq ';
const ARRAYS = {ARRAYS};
// onnxruntime logs its node placements while a session is created: its wasm module
// writes them to fds 1 and 2 (fs.writeSync), its JavaScript through console.
const log = [];
for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
  console[level] = (...args) => { log.push(args.map(String).join(' ')); };
}
const writeSync = fs.writeSync;
fs.writeSync = (fd, data, ...rest) => {
  if (fd !== 1 && fd !== 2) return writeSync(fd, data, ...rest);
  log.push(...String(data).split('\n').filter((line) => line));
  return typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
};
const ort = await import('onnxruntime-web/webgpu');
ort.env.wasm.numThreads = 1;
const sessions = new Map();
let next = 0;
const bytes = (b64) => new Uint8Array(Buffer.from(b64, 'base64'));
const b64 = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
const handlers = {
  adapter: async () => {
    const a = await navigator.gpu.requestAdapter();
    if (!a) return null;
    const info = a.info || {};
    return {vendor: info.vendor || '', architecture: info.architecture || '',
            f16: a.features.has('shader-f16')};
  },
  create: async ({model}) => {
    log.length = 0;
    const session = await ort.InferenceSession.create(bytes(model), {
      executionProviders: ['webgpu'], logSeverityLevel: 0, logVerbosityLevel: 1});
    const id = next++;
    sessions.set(id, session);
    return {id: id, log: log.splice(0)};
  },
  run: async ({id, feeds}) => {
    const session = sessions.get(id), inputs = {};
    for (const [name, f] of Object.entries(feeds)) {
      const data = bytes(f.data);
      inputs[name] = new ort.Tensor(
        f.type, new ARRAYS[f.type](data.buffer, data.byteOffset,
                                   data.byteLength / ARRAYS[f.type].BYTES_PER_ELEMENT),
        f.dims);
    }
    const results = await session.run(inputs), out = {};
    for (const name of session.outputNames) {
      const t = results[name];
      out[name] = {type: t.type, dims: Array.from(t.dims), data: b64(t.data)};
    }
    return out;
  },
  release: async ({id}) => {
    const s = sessions.get(id);
    sessions.delete(id);
    if (s) await s.release();
    return null;
  },
};
const answer = (a) => process.stdout.write(MARK + JSON.stringify(a) + '\n');
for await (const line of readline.createInterface({input: process.stdin})) {
  const request = JSON.parse(line);
  try {
    answer({ok: true, value: await handlers[request.op](request)});
  } catch (e) {
    answer({ok: false, error: String(e && e.message || e)});
  }
}
