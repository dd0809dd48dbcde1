// Our worker (build/index.js) with its D1 and queue bindings metered (bench/meter.mjs).
import Ours from "../build/index.js";
import { metered } from "./meter.mjs";

export default metered(Ours);
