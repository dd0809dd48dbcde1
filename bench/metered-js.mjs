// The JavaScript receiver (bench/js-receiver.js) with its D1 and queue bindings metered.
import Js from "./js-receiver.js";
import { metered } from "./meter.mjs";

export default metered(Js);
