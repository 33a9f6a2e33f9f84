// A validator of OCSF events, read from the schema's own JSON files (test/fixtures/ocsf-1.8.0, a copy
// of the official repository's files at the v1.8.0 release) the way the OCSF server compiles them:
// a class extends its parent up to base_event and takes its category from it, an object extends
// its parent object, `$include` adds a profile's attributes (which count only when the event
// names the profile in metadata.profiles), every attribute's type, enum, sibling and array-ness
// come from dictionary.json under what the class or object says of it. An event passes when it
// has every required attribute, no attribute its class or object does not define (anything goes
// inside `unmapped` and json_t values), values of the declared types (the dictionary's base type,
// its pattern, length and range), enum values from the list, captions that agree with their
// ids, and the class's and objects' constraints (at_least_one, just_one). No package carries the
// schema, and the service's code is not used here: the check is written from the schema alone.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Raw = { [key: string]: Json };

interface EnumValue {
  caption?: string;
}

interface AttributeDef {
  type: string;
  is_array?: boolean;
  requirement?: string;
  enum?: Record<string, EnumValue>;
  sibling?: string;
  /** The profile that brought it: it counts only when the event names that profile. */
  profile?: string;
}

interface Shape {
  name: string;
  caption: string;
  attributes: Map<string, AttributeDef>;
  constraints: { at_least_one?: string[]; just_one?: string[] };
}

interface EventClass extends Shape {
  uid: number;
  category_uid: number;
  category_caption: string;
}

export const OCSF_FIXTURES = fileURLToPath(new URL('../fixtures/ocsf-1.8.0/', import.meta.url));

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Objects merged key by key, as the server merges a child's attribute over its parent's; anything else is replaced. */
function deepMerge(base: Json | undefined, over: Json): Json {
  if (!isPlainObject(base) || !isPlainObject(over)) return over;
  const out: Raw = { ...(base as Raw) };
  for (const [k, v] of Object.entries(over as Raw)) out[k] = deepMerge(out[k], v);
  return out;
}

export class OcsfSchema {
  readonly version: string;
  private readonly dictionary: Raw;
  private readonly types: Raw;
  private readonly categories: Map<string, { uid: number; caption: string }>;
  private readonly rawClasses = new Map<string, Raw>();
  private readonly rawObjects = new Map<string, Raw>();
  private readonly classes = new Map<string, Shape & { category?: string; uid?: number }>();
  private readonly objects = new Map<string, Shape>();
  /** Concrete classes by class_uid. */
  private readonly byUid = new Map<number, EventClass>();

  constructor(private readonly dir = OCSF_FIXTURES) {
    this.version = String((this.read('version.json') as { version: string }).version);
    const dictionary = this.read('dictionary.json');
    this.dictionary = dictionary.attributes as Raw;
    this.types = (dictionary.types as Raw).attributes as Raw;
    this.categories = new Map(Object.entries((this.read('categories.json').attributes as Raw)).map(([name, c]) => [name, { uid: (c as Raw).uid as number, caption: (c as Raw).caption as string }]));
    for (const file of this.jsonFiles('events')) {
      const raw = this.read(file);
      this.rawClasses.set(raw.name as string, raw);
    }
    for (const file of this.jsonFiles('objects')) {
      const raw = this.read(file);
      this.rawObjects.set(raw.name as string, raw);
    }
    for (const name of this.rawClasses.keys()) {
      const cls = this.resolveClass(name);
      const raw = this.rawClasses.get(name)!;
      // A concrete class has a uid of its own (base_event is concrete, in no category: 0).
      if (raw.uid === undefined && name !== 'base_event') continue;
      const category = cls.category === undefined || cls.category === 'other' ? { uid: 0, caption: 'Uncategorized' } : this.categories.get(cls.category);
      if (!category) throw new Error(`class ${name}: unknown category ${cls.category}`);
      const uid = name === 'base_event' ? 0 : category.uid * 1000 + (raw.uid as number);
      this.byUid.set(uid, { ...cls, uid, category_uid: category.uid, category_caption: category.caption });
    }
  }

  private read(rel: string): Raw {
    return JSON.parse(readFileSync(path.join(this.dir, rel), 'utf8')) as Raw;
  }

  private jsonFiles(rel: string): string[] {
    return readdirSync(path.join(this.dir, rel), { withFileTypes: true }).flatMap((e) => {
      const child = path.join(rel, e.name);
      return e.isDirectory() ? this.jsonFiles(child) : e.name.endsWith('.json') ? [child] : [];
    });
  }

  /** The attributes a file defines itself: its own, and those of the profiles it includes (marked with the profile). */
  private ownAttributes(raw: Raw): Map<string, { def: Raw; profile?: string }> {
    const attributes = (raw.attributes ?? {}) as Raw;
    const own = new Map<string, { def: Raw; profile?: string }>();
    const includes = attributes.$include === undefined ? [] : Array.isArray(attributes.$include) ? attributes.$include : [attributes.$include];
    for (const include of includes as string[]) {
      const profile = this.read(include);
      for (const [name, def] of Object.entries(profile.attributes as Raw)) {
        if (!(name in attributes)) own.set(name, { def: def as Raw, profile: profile.name as string });
      }
    }
    for (const [name, def] of Object.entries(attributes)) if (name !== '$include') own.set(name, { def: def as Raw });
    return own;
  }

  /** A file's shape over its parent's: each attribute merged over the parent's definition, or the dictionary's. */
  private extend(raw: Raw, parent: Shape | undefined): Shape {
    const attributes = new Map(parent?.attributes);
    for (const [name, { def, profile }] of this.ownAttributes(raw)) {
      const inherited = attributes.get(name);
      // A profile does not gate what an ancestor already defines for every event.
      if (profile && inherited && !inherited.profile) continue;
      const base = (inherited as unknown as Json) ?? (this.dictionary[name] as Json | undefined);
      if (base === undefined && def.type === undefined) throw new Error(`${String(raw.name)}.${name}: in no dictionary`);
      const merged = deepMerge(base, def) as unknown as AttributeDef;
      // Defined by the file itself: it counts whatever the profiles; brought by a profile: only with it.
      if (profile) merged.profile = profile;
      else delete merged.profile;
      attributes.set(name, merged);
    }
    return {
      name: raw.name as string,
      caption: (raw.caption as string) ?? parent?.caption,
      attributes,
      constraints: (raw.constraints as Shape['constraints'] | undefined) ?? parent?.constraints ?? {},
    };
  }

  private resolveClass(name: string): Shape & { category?: string } {
    const known = this.classes.get(name);
    if (known) return known;
    const raw = this.rawClasses.get(name);
    if (!raw) throw new Error(`no class ${name}`);
    const parent = raw.extends ? this.resolveClass(raw.extends as string) : undefined;
    const shape = { ...this.extend(raw, parent), category: (raw.category as string | undefined) ?? parent?.category };
    this.classes.set(name, shape);
    return shape;
  }

  object(name: string): Shape {
    const known = this.objects.get(name);
    if (known) return known;
    const raw = this.rawObjects.get(name);
    if (!raw) throw new Error(`no object ${name} in ${this.dir}`);
    const parent = raw.extends ? this.object(raw.extends as string) : undefined;
    const shape = this.extend(raw, parent);
    this.objects.set(name, shape);
    return shape;
  }

  eventClass(uid: number): EventClass | undefined {
    return this.byUid.get(uid);
  }

  /** Every problem of an event, each a sentence starting with the attribute's path; none: it is valid. */
  validate(event: unknown): string[] {
    const problems: string[] = [];
    if (!isPlainObject(event)) return ['the event is not a JSON object'];
    const cls = typeof event.class_uid === 'number' ? this.byUid.get(event.class_uid) : undefined;
    if (!cls) return [`class_uid: ${JSON.stringify(event.class_uid)} is no class of the schema`];
    const metadata = event.metadata;
    const named = isPlainObject(metadata) && Array.isArray(metadata.profiles) ? metadata.profiles.filter((p): p is string => typeof p === 'string') : [];
    const profiles = new Set(named);
    // What the server adds to every class: its own uid, category and type as enums with their captions.
    const activities = cls.attributes.get('activity_id')?.enum ?? {};
    const typeEnum = Object.fromEntries(Object.entries(activities).map(([id, a]) => [String(cls.uid * 100 + Number(id)), { caption: `${cls.caption}: ${a.caption ?? ''}` }]));
    const shape: Shape = {
      ...cls,
      attributes: new Map([...cls.attributes].map(([name, def]): [string, AttributeDef] => {
        if (name === 'class_uid') return [name, { ...def, enum: { [cls.uid]: { caption: cls.caption } } }];
        if (name === 'category_uid') return [name, { ...def, enum: { [cls.category_uid]: { caption: cls.category_caption } } }];
        if (name === 'type_uid') return [name, { ...def, enum: typeEnum }];
        return [name, def];
      })),
    };
    this.checkShape(event, shape, '', profiles, problems);
    if (typeof event.type_uid === 'number' && typeof event.activity_id === 'number' && event.type_uid !== cls.uid * 100 + event.activity_id) {
      problems.push(`type_uid: ${event.type_uid} is not class_uid * 100 + activity_id (${cls.uid * 100 + event.activity_id})`);
    }
    return problems;
  }

  private checkShape(value: Record<string, unknown>, shape: Shape, at: string, profiles: Set<string>, problems: string[]): void {
    const where = (name: string) => (at ? `${at}.${name}` : name);
    const counts = (def: AttributeDef) => !def.profile || profiles.has(def.profile);
    for (const [name, v] of Object.entries(value)) {
      const def = shape.attributes.get(name);
      if (!def) problems.push(`${where(name)}: ${shape.name} has no such attribute`);
      else if (!counts(def)) problems.push(`${where(name)}: belongs to the profile ${def.profile}, which metadata.profiles does not name`);
      else this.checkValue(v, def, where(name), profiles, problems);
    }
    for (const [name, def] of shape.attributes) {
      if (def.requirement === 'required' && counts(def) && value[name] === undefined) problems.push(`${where(name)}: required by ${shape.name}, missing`);
      // The caption beside an id (activity_name beside activity_id) says the same, but for Other (99), which the source names.
      const id = value[name];
      if (def.enum && def.sibling && value[def.sibling] !== undefined && (typeof id === 'number' || typeof id === 'string') && Number(id) !== 99) {
        const caption = def.enum[String(id)]?.caption;
        if (caption !== undefined && value[def.sibling] !== caption) problems.push(`${where(def.sibling)}: ${JSON.stringify(value[def.sibling])} is not the caption of ${name} ${String(id)} (${JSON.stringify(caption)})`);
      }
    }
    const present = (names: string[]) => names.filter((n) => value[n] !== undefined);
    const { at_least_one: atLeastOne, just_one: justOne } = shape.constraints;
    if (atLeastOne && present(atLeastOne).length === 0) problems.push(`${at || '(event)'}: ${shape.name} needs at least one of ${atLeastOne.join(', ')}`);
    if (justOne && present(justOne).length !== 1) problems.push(`${at || '(event)'}: ${shape.name} needs exactly one of ${justOne.join(', ')}`);
  }

  private checkValue(v: unknown, def: AttributeDef, at: string, profiles: Set<string>, problems: string[]): void {
    if (v === null) return void problems.push(`${at}: null (an attribute without a value is left out)`);
    if (def.is_array) {
      if (!Array.isArray(v)) return void problems.push(`${at}: not an array`);
      v.forEach((item, i) => this.checkSingle(item, def, `${at}[${i}]`, profiles, problems));
      return;
    }
    if (Array.isArray(v)) return void problems.push(`${at}: an array where ${def.type} is wanted`);
    this.checkSingle(v, def, at, profiles, problems);
  }

  private checkSingle(v: unknown, def: AttributeDef, at: string, profiles: Set<string>, problems: string[]): void {
    if (def.type in this.types) {
      const problem = this.scalarProblem(v, def.type);
      if (problem) return void problems.push(`${at}: ${problem}`);
      if (def.enum && !(String(v) in def.enum)) problems.push(`${at}: ${JSON.stringify(v)} is not one of ${Object.keys(def.enum).join(', ')}`);
      return;
    }
    if (!isPlainObject(v)) return void problems.push(`${at}: not an object (${def.type})`);
    // The generic object (`unmapped`): any content.
    if (def.type === 'object') return;
    this.checkShape(v, this.object(def.type), at, profiles, problems);
  }

  /** What is wrong with a value of a dictionary type, through its chain of types down to the base one. */
  private scalarProblem(v: unknown, typeName: string): string | undefined {
    const type = this.types[typeName] as Raw;
    if (type.type !== undefined) {
      const below = this.scalarProblem(v, type.type as string);
      if (below) return below;
    } else {
      const ok: Record<string, (x: unknown) => boolean> = {
        string_t: (x) => typeof x === 'string',
        integer_t: (x) => Number.isInteger(x) && (x as number) >= -(2 ** 31) && (x as number) < 2 ** 31,
        long_t: (x) => Number.isSafeInteger(x),
        float_t: (x) => typeof x === 'number' && Number.isFinite(x),
        boolean_t: (x) => typeof x === 'boolean',
        json_t: (x) => x !== undefined,
      };
      const check = ok[typeName];
      if (!check) throw new Error(`no check for the base type ${typeName}`);
      if (!check(v)) return `${JSON.stringify(v)} is not a ${typeName}`;
    }
    if (typeof type.regex === 'string' && typeof v === 'string' && !new RegExp(type.regex).test(v)) return `${JSON.stringify(v)} does not match ${typeName}'s pattern`;
    if (typeof type.max_len === 'number' && typeof v === 'string' && v.length > type.max_len) return `longer than ${typeName}'s ${type.max_len} characters`;
    if (Array.isArray(type.range) && typeof v === 'number' && (v < (type.range[0] as number) || v > (type.range[1] as number))) return `${v} is outside ${typeName}'s range`;
    if (Array.isArray(type.values) && !type.values.includes(v as Json)) return `${JSON.stringify(v)} is not one of ${typeName}'s values`;
    return undefined;
  }
}

let loaded: OcsfSchema | undefined;

/** The schema of test/fixtures/ocsf-1.8.0, read once per process. */
export function ocsfSchema(): OcsfSchema {
  return (loaded ??= new OcsfSchema());
}
