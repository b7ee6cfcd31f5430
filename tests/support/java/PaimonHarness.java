/*
 * Test harness driving Apache Paimon 0.9's own Java core for lakesweep's tests.
 *
 * Protocol: one JSON object per line on stdin, one JSON object per line on stdout.
 * Everything else (logs, library noise) goes to stderr.
 *
 * Commands:
 *   {"cmd":"ping"}
 *   {"cmd":"generate","table":DIR,"seed":N,"kind":"append"|"pk","steps":N,
 *        "options":{...}, "ops":{"write":w,...},
 *        "manifestCompression":"zstd"|"snappy"|"deflate"|"null",
 *        "partitions":N, "rowsPerWrite":N, "bucketDirs":true|false, "partitioned":true|false}
 *   {"cmd":"expire","table":DIR,"retainMin":N,"retainMax":N,
 *        "timeRetainedMs":N | "olderThanMs":N,"maxDeletes":N,
 *        "changelogRetainMin":N,"changelogRetainMax":N}
 *   {"cmd":"live_files","table":DIR}
 *   {"cmd":"read_rows","table":DIR,"snapshot":N | "tag":NAME}
 *   {"cmd":"create_branch","table":DIR,"branch":NAME,"tag":NAME}
 *   {"cmd":"write","table":DIR,"branch":NAME,"seed":N,"commits":N,"partitions":[DT,...]}
 *   {"cmd":"delete_branch","table":DIR,"branch":NAME}
 *   {"cmd":"orphan_clean","table":DIR,"olderThanMillis":N}
 *   {"cmd":"write_partitions","table":DIR,"kind":"append"|"pk",
 *        "partitionKeys":[{"name":"dt","type":"STRING"|"INT"|"DATE"|"TIMESTAMP(3)"|...},...],
 *        "options":{...},"partitions":[["20230101","us"],[null,""],...],"commits":N,
 *        "rowsPerPartition":N,"firstId":N,"seed":N,"creationTimes":[ISO local date-time,...]}
 *   {"cmd":"partitions","table":DIR,"snapshot":N}
 *   {"cmd":"expire_partitions","table":DIR,"expirationTime":"2 d"|MS,"now":ISO|[ISO,...],
 *        "strategy":"values-time"|"update-time","timestampFormatter":F,"timestampPattern":P,
 *        "via":"procedure"|"table","checkInterval":"1 d","lastCheck":ISO}
 *
 * write_partitions creates (or appends to) a table partitioned by chosen keys and types and
 * writes rows into chosen partitions (null, "" and non-date values included), one APPEND snapshot
 * per commit, with the files' _CREATION_TIME optionally set per commit; partitions describes a
 * snapshot's live partitions (spec, directory, files, Paimon's PartitionEntry figures);
 * expire_partitions runs 0.9's PartitionExpire as its expire_partitions procedure builds it (or
 * as a writer does, via "table") at explicit local nows.  0.9 has no max-num or batch size.
 * Details at writePartitions, partitions and expirePartitions below.
 *
 * generate creates the table with SchemaManager + FileStoreTableFactory over LocalFileIO
 * (schema: dt STRING partition key, id INT, v INT, s STRING; pk tables have PRIMARY KEY (dt, id);
 * with "partitioned": false dt is an ordinary column and the table has no partition key)
 * and runs `steps` random operations drawn with the seed: write, delete (pk), full compaction,
 * partition overwrite, tag create/delete, consumer reset.  Table options are drawn from the
 * seed too (file.format, bucket, changelog-producer, deletion vectors, merge-min-count) and
 * "options" overrides them (null removes one).  "ops" overrides the op weights.
 * "manifestCompression" picks the Avro codec of manifests, manifest lists and index manifests
 * (see manifestCodecOptions).  "partitions" fixes the number of dt partitions (default: 2 or 3,
 * drawn from the seed) and "rowsPerWrite" the number of rows of every write (default: 3..22,
 * drawn per write); large values of both make every commit touch many partitions and buckets,
 * which is how benchmarks reach hundreds of thousands of files in minutes; "bucketDirs": false
 * leaves out the answer's bucketDirs, which scan every snapshot (slow on such tables).  Paimon never
 * expires anything itself during generation (snapshot.num-retained.min/max = 1000/2000).
 * Commit messages are committed in two commits (APPEND or OVERWRITE part, then COMPACT part),
 * each followed by a wait until the clock is 10 ms past the new snapshot, so that snapshot times
 * are clearly distinct; Paimon itself would make the same two snapshots from one commit call.
 * The answer lists snapshots (id, timeMillis, commitKind, manifest lists, ...), tags,
 * consumers, the persisted options, partitions, bucket, bucketDirs (relative bucket directories
 * referenced by any snapshot) and ops (log).
 *
 * expire with changelogRetainMin/Max set keeps changelogs longer than snapshots (decoupled): the
 * expired snapshots it still needs become changelog/changelog-N files.
 *
 * create_branch makes a branch from a tag (an empty one without "tag"); write commits "commits"
 * random writes to the branch ("main" when absent) as generate's write op does, the dt values
 * drawn from "partitions" (default: generate's first two); delete_branch drops a branch the way
 * Paimon does (its directory goes, the data and manifests it wrote stay where they are).
 *
 * orphan_clean runs Paimon 0.9's OrphanFilesClean as a dry run: its file cleaner records each
 * path it is handed, and whether that path is a directory at that moment, and deletes nothing.
 * The threshold is set to exactly olderThanMillis (epoch ms; OrphanFilesClean#olderThan would
 * parse a local date-time string).  Answers "cleaned": [{"path": absolute path, "dir": bool}],
 * sorted by path.
 *
 * live_files answers, with paths relative to the table root:
 *   snapshots/tags:          data files (+ extra files + deletion-vector index files) that
 *                            Paimon's SnapshotReader returns for the snapshot/tag (ScanMode.ALL)
 *   changelogs:              changelog files of snapshots that have a changelog manifest list
 *   indexFiles/tagIndexFiles: every file of the snapshot's index manifest (this includes empty
 *                            DV index files that no data file points at)
 *   tagSnapshots:            tag name -> snapshot id
 *
 * Every answer carries "ok"; failures are {"ok":false,"error":"<class>: <message>","trace":...}.
 */

import org.apache.paimon.CoreOptions;
import org.apache.paimon.Snapshot;
import org.apache.paimon.append.UnawareAppendCompactionTask;
import org.apache.paimon.consumer.Consumer;
import org.apache.paimon.consumer.ConsumerManager;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.deletionvectors.DeletionVectorsIndexFile;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.index.HashIndexFile;
import org.apache.paimon.index.IndexFileHandler;
import org.apache.paimon.index.IndexFileMeta;
import org.apache.paimon.io.CompactIncrement;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.io.DataIncrement;
import org.apache.paimon.io.IndexIncrement;
import org.apache.paimon.manifest.IndexManifestEntry;
import org.apache.paimon.operation.AppendOnlyFileStoreWrite;
import org.apache.paimon.operation.OrphanFilesClean;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.schema.SchemaManager;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.table.ExpireSnapshots;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.CommitMessageImpl;
import org.apache.paimon.table.sink.TableCommitImpl;
import org.apache.paimon.table.sink.TableWriteImpl;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.DeletionFile;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.ScanMode;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.snapshot.SnapshotReader;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;
import org.apache.paimon.utils.SnapshotManager;

import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;

public class PaimonHarness {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** Number of distinct primary-key values per partition; small so upserts/deletes overlap. */
    private static final int KEY_SPACE = 40;

    private static final String[] OP_NAMES = {
        "write", "delete", "compact", "overwrite", "tag", "untag", "consumer"
    };

    public static void main(String[] args) throws Exception {
        // Keep the protocol channel clean: anything printed by libraries lands on stderr.
        PrintStream out =
                new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) {
                continue;
            }
            ObjectNode result;
            try {
                JsonNode cmd = JSON.readTree(line);
                result = JSON.createObjectNode();
                result.put("ok", true);
                result.setAll(dispatch(cmd));
            } catch (Throwable t) {
                result = JSON.createObjectNode();
                result.put("ok", false);
                result.put("error", t.getClass().getName() + ": " + t.getMessage());
                StringWriter sw = new StringWriter();
                t.printStackTrace(new PrintWriter(sw));
                result.put("trace", sw.toString());
            }
            out.println(JSON.writeValueAsString(result));
            out.flush();
        }
    }

    private static ObjectNode dispatch(JsonNode cmd) throws Exception {
        String name = cmd.path("cmd").asText("");
        switch (name) {
            case "ping":
                ObjectNode pong = JSON.createObjectNode();
                pong.put("java", System.getProperty("java.version"));
                return pong;
            case "generate":
                return generate(cmd);
            case "expire":
                return expire(cmd);
            case "live_files":
                return liveFiles(cmd);
            case "read_rows":
                return readRows(cmd);
            case "create_branch":
                return createBranch(cmd);
            case "write":
                return write(cmd);
            case "delete_branch":
                return deleteBranch(cmd);
            case "orphan_clean":
                return orphanClean(cmd);
            case "partition_time":
                return partitionTime(cmd);
            case "expire_partitions":
                return expirePartitions(cmd);
            case "expire_consumers":
                return expireConsumers(cmd);
            case "create_tag":
                return createTag(cmd);
            case "delete_tags":
                return deleteTags(cmd);
            case "expire_tags":
                return expireTags(cmd);
            case "auto_tag_create":
                return autoTagCreate(cmd);
            case "expire_changelog":
                return expireChangelog(cmd);
            case "write_partitions":
                return writePartitions(cmd);
            case "partitions":
                return partitions(cmd);
            default:
                throw new IllegalArgumentException("unknown command '" + name + "'");
        }
    }

    // ------------------------------------------------------------------ helpers

    private static String requireText(JsonNode cmd, String field) {
        JsonNode n = cmd.get(field);
        if (n == null || n.isNull() || !n.isTextual()) {
            throw new IllegalArgumentException("missing string field '" + field + "'");
        }
        return n.asText();
    }

    private static Path tablePath(JsonNode cmd) {
        return new Path(new File(requireText(cmd, "table")).getAbsolutePath());
    }

    private static FileStoreTable open(Path path) {
        return FileStoreTableFactory.create(LocalFileIO.create(), path);
    }

    /** Path of {@code p} relative to the table root, e.g. {@code dt=a/bucket-0/data-x.orc}. */
    private static String relative(Path root, String p) {
        String rootStr = root.toUri().getPath();
        String s = new Path(p).toUri().getPath();
        if (!rootStr.endsWith("/")) {
            rootStr = rootStr + "/";
        }
        if (!s.startsWith(rootStr)) {
            throw new IllegalStateException("path " + s + " is outside table root " + rootStr);
        }
        return s.substring(rootStr.length());
    }

    /** Smallest gap between the timeMillis of consecutive generated snapshots. */
    private static final long MIN_SNAPSHOT_GAP_MS = 10;

    /**
     * Waits until the clock is at least MIN_SNAPSHOT_GAP_MS past the latest snapshot's time, so
     * the next commit gets a clearly distinct timeMillis however long this one took.
     */
    private static void waitPastLatestSnapshot(Gen g) throws InterruptedException {
        Snapshot latest = g.table.snapshotManager().latestSnapshot();
        if (latest == null) {
            return;
        }
        long until = latest.timeMillis() + MIN_SNAPSHOT_GAP_MS;
        for (long now = System.currentTimeMillis(); now < until; now = System.currentTimeMillis()) {
            Thread.sleep(until - now);
        }
    }

    // ------------------------------------------------------------------ generate

    /** State shared by the steps of one generate command. */
    private static final class Gen {
        final Random r;
        final boolean pk;
        final boolean unawareBucket;
        final boolean partitioned;
        final FileStoreTable table;
        final IOManager ioManager;
        final String user;
        final List<String> partitions;
        /** Rows per write; 0 draws 3..22 per write. */
        int rowsPerWrite = 0;
        long identifier = 1;
        int tagCounter = 0;

        Gen(
                Random r,
                boolean pk,
                boolean unawareBucket,
                FileStoreTable table,
                IOManager ioManager,
                String user,
                List<String> partitions) {
            this.r = r;
            this.pk = pk;
            this.unawareBucket = unawareBucket;
            this.partitioned = !table.partitionKeys().isEmpty();
            this.table = table;
            this.ioManager = ioManager;
            this.user = user;
            this.partitions = partitions;
        }

        Long latest() {
            return table.snapshotManager().latestSnapshotId();
        }

        Long earliest() {
            return table.snapshotManager().earliestSnapshotId();
        }

        GenericRow randomRow(RowKind kind, String dt) {
            return GenericRow.ofKind(
                    kind,
                    BinaryString.fromString(dt),
                    r.nextInt(KEY_SPACE),
                    r.nextInt(1000),
                    BinaryString.fromString("s" + r.nextInt(50)));
        }

        String randomPartition() {
            return partitions.get(r.nextInt(partitions.size()));
        }

        TableWriteImpl<?> newWrite() {
            return table.newWrite(user).withIOManager(ioManager);
        }
    }

    /**
     * Table options that make Paimon 0.9 write its Avro metadata files with the given codec.
     *
     * <p>Paimon 0.9's AvroFileFormat.createCodecFactory uses the format option "avro.codec" when
     * it is set, else zstd when manifest.compression is "zstd", else Avro's default codec
     * (snappy): manifest.compression alone reaches only zstd and snappy.  Later Paimon versions
     * hand any other manifest.compression value to Avro's CodecFactory.fromString, so the table
     * carries both options and states its codec the way either version reads it.  "avro.codec"
     * applies to Avro data files too (file.format=avro).
     */
    private static Map<String, String> manifestCodecOptions(String codec) {
        Map<String, String> out = new TreeMap<>();
        switch (codec) {
            case "zstd":
                out.put("manifest.compression", "zstd");
                out.put("avro.codec", null);
                break;
            case "snappy":
            case "deflate":
            case "null":
                out.put("manifest.compression", codec);
                out.put("avro.codec", codec);
                break;
            default:
                throw new IllegalArgumentException(
                        "manifestCompression must be zstd, snappy, deflate or null, got '" + codec + "'");
        }
        return out;
    }

    private static ObjectNode generate(JsonNode cmd) throws Exception {
        Path path = tablePath(cmd);
        long seed = cmd.path("seed").asLong(0);
        String kind = cmd.path("kind").asText("append");
        int steps = cmd.path("steps").asInt(20);
        if (!kind.equals("append") && !kind.equals("pk")) {
            throw new IllegalArgumentException("kind must be 'append' or 'pk', got " + kind);
        }
        boolean pk = kind.equals("pk");
        LocalFileIO fileIO = LocalFileIO.create();
        if (fileIO.exists(new Path(path, "schema"))) {
            throw new IllegalStateException("table already exists at " + path);
        }

        Random r = new Random(seed);
        String[] formats = {"parquet", "orc", "avro"};
        Map<String, String> options = new TreeMap<>();
        options.put("file.format", formats[r.nextInt(formats.length)]);
        options.put("manifest.merge-min-count", String.valueOf(2 + r.nextInt(3)));
        // Paimon must never expire anything by itself while we build the history.
        options.put("snapshot.num-retained.min", "1000");
        options.put("snapshot.num-retained.max", "2000");
        options.put("snapshot.time-retained", "365 d");
        if (pk) {
            options.put("bucket", String.valueOf(2 + r.nextInt(2)));
            boolean dv = r.nextInt(3) == 0;
            String[] producers =
                    dv
                            ? new String[] {"none", "input", "lookup"}
                            : new String[] {"none", "input", "lookup", "full-compaction"};
            options.put("changelog-producer", producers[r.nextInt(producers.length)]);
            if (dv) {
                options.put("deletion-vectors.enabled", "true");
            }
            options.put("num-sorted-run.compaction-trigger", String.valueOf(3 + r.nextInt(3)));
        } else {
            if (r.nextBoolean()) {
                options.put("bucket", "-1");
            } else {
                options.put("bucket", String.valueOf(1 + r.nextInt(3)));
                options.put("bucket-key", "id");
                options.put("compaction.min.file-num", String.valueOf(3 + r.nextInt(3)));
            }
        }
        JsonNode overrides = cmd.get("options");
        if (overrides != null && overrides.isObject()) {
            Iterator<Map.Entry<String, JsonNode>> it = overrides.fields();
            while (it.hasNext()) {
                Map.Entry<String, JsonNode> e = it.next();
                if (e.getValue().isNull()) {
                    options.remove(e.getKey());
                } else {
                    options.put(e.getKey(), e.getValue().asText());
                }
            }
        }

        JsonNode codec = cmd.get("manifestCompression");
        if (codec != null && !codec.isNull()) {
            for (Map.Entry<String, String> e : manifestCodecOptions(codec.asText()).entrySet()) {
                if (overrides != null && overrides.has(e.getKey())) {
                    throw new IllegalArgumentException(
                            "pass '" + e.getKey() + "' through manifestCompression or options, not both");
                }
                if (e.getValue() == null) {
                    options.remove(e.getKey());
                } else {
                    options.put(e.getKey(), e.getValue());
                }
            }
        }

        int[] weights =
                pk ? new int[] {40, 14, 12, 8, 12, 5, 9} : new int[] {50, 0, 14, 10, 12, 5, 9};
        JsonNode ops = cmd.get("ops");
        if (ops != null && ops.isObject()) {
            Iterator<Map.Entry<String, JsonNode>> it = ops.fields();
            while (it.hasNext()) {
                Map.Entry<String, JsonNode> e = it.next();
                int idx = java.util.Arrays.asList(OP_NAMES).indexOf(e.getKey());
                if (idx < 0) {
                    throw new IllegalArgumentException("unknown op '" + e.getKey() + "'");
                }
                weights[idx] = e.getValue().asInt();
            }
        }
        if (!pk) {
            weights[1] = 0; // deletes need a primary key
        }
        int totalWeight = 0;
        for (int w : weights) {
            totalWeight += w;
        }
        if (weights[0] <= 0) {
            throw new IllegalArgumentException("the 'write' op weight must be positive");
        }

        int numPartitions = 2 + r.nextInt(2);
        if (cmd.hasNonNull("partitions")) {
            numPartitions = cmd.get("partitions").asInt();
            if (numPartitions < 1) {
                throw new IllegalArgumentException("partitions must be >= 1, got " + numPartitions);
            }
        }
        int rowsPerWrite = cmd.path("rowsPerWrite").asInt(0);
        if (rowsPerWrite < 0) {
            throw new IllegalArgumentException(
                    "rowsPerWrite must be >= 1 (0 or absent: drawn per write), got " + rowsPerWrite);
        }
        List<String> partitions = new ArrayList<>();
        for (int i = 0; i < numPartitions; i++) {
            // 2024-01-01, 2024-01-02, ... (the first nine are the names earlier versions used)
            partitions.add(java.time.LocalDate.of(2024, 1, 1).plusDays(i).toString());
        }

        Schema.Builder sb =
                Schema.newBuilder()
                        .column("dt", DataTypes.STRING())
                        .column("id", DataTypes.INT())
                        .column("v", DataTypes.INT())
                        .column("s", DataTypes.STRING())
                        .options(options);
        if (cmd.path("partitioned").asBoolean(true)) {
            sb.partitionKeys("dt");
        }
        if (pk) {
            sb.primaryKey("dt", "id");
        }
        new SchemaManager(fileIO, path).createTable(sb.build());
        FileStoreTable table = open(path);
        boolean unaware = !pk && table.coreOptions().bucket() == -1;

        List<String> opLog = new ArrayList<>();
        try (IOManager ioManager = IOManager.create(System.getProperty("java.io.tmpdir"))) {
            Gen g = new Gen(r, pk, unaware, table, ioManager, "lakesweep-gen-" + seed, partitions);
            g.rowsPerWrite = rowsPerWrite;
            for (int step = 0; step < steps; step++) {
                String op = "write";
                if (step > 0) {
                    int pick = r.nextInt(totalWeight);
                    for (int i = 0; i < weights.length; i++) {
                        if (pick < weights[i]) {
                            op = OP_NAMES[i];
                            break;
                        }
                        pick -= weights[i];
                    }
                }
                opLog.add(runOp(g, op));
            }
        }

        // ---- describe the outcome
        table = open(path);
        ObjectNode res = JSON.createObjectNode();
        SnapshotManager sm = table.snapshotManager();
        ArrayNode snaps = res.putArray("snapshots");
        Long earliest = sm.earliestSnapshotId();
        Long latest = sm.latestSnapshotId();
        TreeSet<String> bucketDirs = new TreeSet<>();
        boolean withBucketDirs = cmd.path("bucketDirs").asBoolean(true);
        if (earliest != null) {
            for (long id = earliest; id <= latest; id++) {
                if (!sm.snapshotExists(id)) {
                    continue;
                }
                Snapshot s = sm.snapshot(id);
                ObjectNode n = snaps.addObject();
                n.put("id", s.id());
                n.put("timeMillis", s.timeMillis());
                n.put("commitKind", s.commitKind().name());
                n.put("schemaId", s.schemaId());
                n.put("baseManifestList", s.baseManifestList());
                n.put("deltaManifestList", s.deltaManifestList());
                n.put("changelogManifestList", s.changelogManifestList());
                n.put("indexManifest", s.indexManifest());
                n.put("totalRecordCount", s.totalRecordCount());
                if (!withBucketDirs) {
                    continue;
                }
                for (String f : filesOf(table, path, s, ScanMode.ALL, false)) {
                    bucketDirs.add(f.substring(0, f.lastIndexOf('/')));
                }
                if (s.changelogManifestList() != null) {
                    for (String f : filesOf(table, path, s, ScanMode.CHANGELOG, false)) {
                        bucketDirs.add(f.substring(0, f.lastIndexOf('/')));
                    }
                }
            }
        }
        ObjectNode tags = res.putObject("tags");
        for (Map.Entry<Snapshot, List<String>> e : table.tagManager().tags().entrySet()) {
            for (String name : e.getValue()) {
                tags.put(name, e.getKey().id());
            }
        }
        ObjectNode consumers = res.putObject("consumers");
        for (Map.Entry<String, Long> e :
                new TreeMap<>(new ConsumerManager(fileIO, path).consumers()).entrySet()) {
            consumers.put(e.getKey(), e.getValue());
        }
        ObjectNode opts = res.putObject("options");
        // the options as persisted in the schema file (without the runtime-only 'path')
        Map<String, String> persisted = new SchemaManager(fileIO, path).latest().get().options();
        for (Map.Entry<String, String> e : new TreeMap<>(persisted).entrySet()) {
            opts.put(e.getKey(), e.getValue());
        }
        res.put("kind", kind);
        res.put("bucket", table.coreOptions().bucket());
        ArrayNode parts = res.putArray("partitions");
        partitions.forEach(parts::add);
        if (withBucketDirs) {
            ArrayNode dirs = res.putArray("bucketDirs");
            bucketDirs.forEach(dirs::add);
        }
        ArrayNode opsDone = res.putArray("ops");
        opLog.forEach(opsDone::add);
        return res;
    }

    /** Runs one random operation; returns a short description (falls back to a write). */
    private static String runOp(Gen g, String op) throws Exception {
        Long latest = g.latest();
        switch (op) {
            case "delete":
                return latest == null ? doWrite(g) : doDelete(g);
            case "compact":
                if (latest != null) {
                    String done = doCompact(g);
                    if (done != null) {
                        return done;
                    }
                }
                return doWrite(g);
            case "overwrite":
                return doOverwrite(g);
            case "tag":
                if (latest == null) {
                    return doWrite(g);
                }
                long earliest = g.earliest();
                long target = earliest + g.r.nextInt((int) (latest - earliest + 1));
                String name = "tag-" + (++g.tagCounter);
                g.table.createTag(name, target);
                return "tag " + name + "@" + target;
            case "untag":
                List<String> names = new ArrayList<>(new TreeSet<>(g.table.tagManager().allTagNames()));
                if (names.isEmpty()) {
                    return doWrite(g);
                }
                String victim = names.get(g.r.nextInt(names.size()));
                g.table.deleteTag(victim);
                return "untag " + victim;
            case "consumer":
                if (latest == null) {
                    return doWrite(g);
                }
                long first = g.earliest();
                long next = first + g.r.nextInt((int) (latest - first + 2));
                String id = "consumer-" + g.r.nextInt(3);
                new ConsumerManager(g.table.fileIO(), g.table.location())
                        .resetConsumer(id, new Consumer(next));
                return "consumer " + id + "=" + next;
            case "write":
            default:
                return doWrite(g);
        }
    }

    private static String doWrite(Gen g) throws Exception {
        int n = g.rowsPerWrite > 0 ? g.rowsPerWrite : 3 + g.r.nextInt(20);
        List<CommitMessage> messages;
        try (TableWriteImpl<?> write = g.newWrite()) {
            for (int i = 0; i < n; i++) {
                write.write(g.randomRow(RowKind.INSERT, g.randomPartition()));
            }
            messages = write.prepareCommit(true, g.identifier);
        }
        commitSplit(g, messages);
        return "write " + n;
    }

    private static String doDelete(Gen g) throws Exception {
        int n = 1 + g.r.nextInt(8);
        List<CommitMessage> messages;
        try (TableWriteImpl<?> write = g.newWrite()) {
            for (int i = 0; i < n; i++) {
                write.write(g.randomRow(RowKind.DELETE, g.randomPartition()));
            }
            messages = write.prepareCommit(true, g.identifier);
        }
        commitSplit(g, messages);
        return "delete " + n;
    }

    private static String doOverwrite(Gen g) throws Exception {
        String dt = g.randomPartition();
        // one time in ten the partition is overwritten with nothing (i.e. truncated)
        int n = g.r.nextInt(10) == 0 ? 0 : 3 + g.r.nextInt(15);
        List<CommitMessage> messages;
        try (TableWriteImpl<?> write = g.newWrite().withIgnorePreviousFiles(true)) {
            for (int i = 0; i < n; i++) {
                write.write(g.randomRow(RowKind.INSERT, dt));
            }
            messages = write.prepareCommit(true, g.identifier);
        }
        // an unpartitioned table is overwritten whole
        Map<String, String> spec = new HashMap<>();
        if (g.partitioned) {
            spec.put("dt", dt);
        }
        // Paimon's overwrite makes an OVERWRITE snapshot and then, when the write compacted, a
        // COMPACT one, and commits no changelog; the same, as two commits.
        Parts parts = parts(messages, true);
        try (TableCommitImpl commit = g.table.newCommit(g.user).withOverwrite(spec)) {
            commit.commit(g.identifier++, parts.append);
        }
        waitPastLatestSnapshot(g);
        if (!parts.compact.isEmpty()) {
            try (TableCommitImpl commit = g.table.newCommit(g.user)) {
                commit.commit(g.identifier++, parts.compact);
            }
            waitPastLatestSnapshot(g);
        }
        return "overwrite " + (g.partitioned ? dt : "*") + " " + n;
    }

    /** Full compaction of one random partition, or null when there is nothing to compact. */
    private static String doCompact(Gen g) throws Exception {
        List<DataSplit> splits = g.table.newSnapshotReader().read().dataSplits();
        TreeMap<String, BinaryRow> partRows = new TreeMap<>();
        Map<String, TreeSet<Integer>> buckets = new HashMap<>();
        Map<String, List<DataFileMeta>> files = new HashMap<>();
        for (DataSplit split : splits) {
            String dt = g.partitioned ? split.partition().getString(0).toString() : "";
            partRows.put(dt, split.partition());
            buckets.computeIfAbsent(dt, k -> new TreeSet<>()).add(split.bucket());
            files.computeIfAbsent(dt, k -> new ArrayList<>()).addAll(split.dataFiles());
        }
        if (partRows.isEmpty()) {
            return null;
        }
        List<String> dts = new ArrayList<>(partRows.keySet());
        String dt = dts.get(g.r.nextInt(dts.size()));
        BinaryRow partition = partRows.get(dt);
        List<CommitMessage> messages = new ArrayList<>();
        if (g.unawareBucket) {
            // bucket=-1 tables are compacted by a dedicated job in Paimon; do what it does.
            List<DataFileMeta> before = files.get(dt);
            if (before.size() < 2) {
                return null;
            }
            AppendOnlyFileStoreWrite write =
                    (AppendOnlyFileStoreWrite) g.table.store().newWrite(g.user);
            try {
                write.withIOManager(g.ioManager);
                messages.add(
                        new UnawareAppendCompactionTask(partition, new ArrayList<>(before))
                                .doCompact(g.table, write));
            } finally {
                write.close();
            }
        } else {
            try (TableWriteImpl<?> write = g.newWrite()) {
                for (int bucket : buckets.get(dt)) {
                    write.compact(partition, bucket, true);
                }
                messages.addAll(write.prepareCommit(true, g.identifier));
            }
        }
        commitSplit(g, messages);
        return "compact " + (g.partitioned ? dt : "*");
    }

    /** A commit's messages, parted into what Paimon commits as APPEND and as COMPACT. */
    private static final class Parts {
        final List<CommitMessage> append = new ArrayList<>();
        final List<CommitMessage> compact = new ArrayList<>();
    }

    /**
     * Parts messages the way FileStoreCommitImpl does: new files and new hash index files make
     * the APPEND (or OVERWRITE) snapshot; compaction and deletion-vector index changes make the
     * COMPACT one.  dropChangelog leaves changelog files out, as Paimon's overwrite does.
     */
    private static Parts parts(List<CommitMessage> messages, boolean dropChangelog) {
        Parts out = new Parts();
        for (CommitMessage m0 : messages) {
            CommitMessageImpl m = (CommitMessageImpl) m0;
            List<IndexFileMeta> hashNew = new ArrayList<>();
            List<IndexFileMeta> dvNew = new ArrayList<>();
            for (IndexFileMeta f : m.indexIncrement().newIndexFiles()) {
                if (HashIndexFile.HASH_INDEX.equals(f.indexType())) {
                    hashNew.add(f);
                } else if (DeletionVectorsIndexFile.DELETION_VECTORS_INDEX.equals(f.indexType())) {
                    dvNew.add(f);
                } else {
                    throw new IllegalStateException("unknown index type " + f.indexType());
                }
            }
            List<IndexFileMeta> deleted = m.indexIncrement().deletedIndexFiles();
            DataIncrement data = m.newFilesIncrement();
            CompactIncrement compacted = m.compactIncrement();
            if (dropChangelog) {
                data =
                        new DataIncrement(
                                data.newFiles(), data.deletedFiles(), Collections.emptyList());
                compacted =
                        new CompactIncrement(
                                compacted.compactBefore(),
                                compacted.compactAfter(),
                                Collections.emptyList());
            }
            if (!data.isEmpty() || !hashNew.isEmpty()) {
                out.append.add(
                        new CommitMessageImpl(
                                m.partition(),
                                m.bucket(),
                                data,
                                CompactIncrement.emptyIncrement(),
                                new IndexIncrement(hashNew)));
            }
            if (!compacted.isEmpty() || !dvNew.isEmpty() || !deleted.isEmpty()) {
                out.compact.add(
                        new CommitMessageImpl(
                                m.partition(),
                                m.bucket(),
                                DataIncrement.emptyIncrement(),
                                compacted,
                                new IndexIncrement(dvNew, deleted)));
            }
        }
        return out;
    }

    /**
     * Commits the messages the way Paimon would (APPEND snapshot, then COMPACT snapshot), but as
     * two separate commits with a pause in between so every snapshot gets its own timestamp.
     */
    private static void commitSplit(Gen g, List<CommitMessage> messages) throws Exception {
        Parts parts = parts(messages, false);
        try (TableCommitImpl commit = g.table.newCommit(g.user)) {
            if (!parts.append.isEmpty()) {
                commit.commit(g.identifier++, parts.append);
                waitPastLatestSnapshot(g);
            }
            if (!parts.compact.isEmpty()) {
                commit.commit(g.identifier++, parts.compact);
                waitPastLatestSnapshot(g);
            }
        }
        if (parts.append.isEmpty() && parts.compact.isEmpty()) {
            g.identifier++;
        }
    }

    // ------------------------------------------------------------------ expire

    private static ObjectNode expire(JsonNode cmd) throws Exception {
        Path path = tablePath(cmd);
        FileStoreTable table = open(path);
        ExpireConfig.Builder b = ExpireConfig.builder();
        if (cmd.hasNonNull("retainMin")) {
            b.snapshotRetainMin(cmd.get("retainMin").asInt());
        }
        if (cmd.hasNonNull("retainMax")) {
            b.snapshotRetainMax(cmd.get("retainMax").asInt());
        }
        if (cmd.hasNonNull("maxDeletes")) {
            b.snapshotMaxDeletes(cmd.get("maxDeletes").asInt());
        }
        boolean hasRetained = cmd.hasNonNull("timeRetainedMs");
        boolean hasOlderThan = cmd.hasNonNull("olderThanMs");
        if (hasRetained && hasOlderThan) {
            throw new IllegalArgumentException("give timeRetainedMs or olderThanMs, not both");
        }
        if (hasRetained) {
            b.snapshotTimeRetain(Duration.ofMillis(cmd.get("timeRetainedMs").asLong()));
        }
        if (cmd.hasNonNull("changelogRetainMin")) {
            b.changelogRetainMin(cmd.get("changelogRetainMin").asInt());
        }
        if (cmd.hasNonNull("changelogRetainMax")) {
            b.changelogRetainMax(cmd.get("changelogRetainMax").asInt());
        }
        ExpireSnapshots expire = table.newExpireSnapshots();
        if (hasOlderThan) {
            // ExpireSnapshotsImpl computes olderThan = now - timeRetained itself; compute the
            // duration as late as possible so the effective cut-off drifts by well under 1 ms.
            long retained = System.currentTimeMillis() - cmd.get("olderThanMs").asLong();
            b.snapshotTimeRetain(Duration.ofMillis(retained));
        }
        int expired = expire.config(b.build()).expire();
        ObjectNode res = JSON.createObjectNode();
        res.put("expired", expired);
        return res;
    }

    // ------------------------------------------------------------------ branches

    private static ObjectNode createBranch(JsonNode cmd) {
        FileStoreTable table = open(tablePath(cmd));
        String branch = requireText(cmd, "branch");
        if (cmd.hasNonNull("tag")) {
            table.createBranch(branch, cmd.get("tag").asText());
        } else {
            table.createBranch(branch);
        }
        return JSON.createObjectNode();
    }

    private static ObjectNode deleteBranch(JsonNode cmd) {
        open(tablePath(cmd)).deleteBranch(requireText(cmd, "branch"));
        return JSON.createObjectNode();
    }

    /** Random writes committed to one branch, as generate's write op makes them. */
    private static ObjectNode write(JsonNode cmd) throws Exception {
        FileStoreTable table = open(tablePath(cmd));
        String branch = cmd.hasNonNull("branch") ? cmd.get("branch").asText() : "main";
        if (!branch.equals("main")) {
            table = table.switchToBranch(branch);
        }
        long seed = cmd.path("seed").asLong(0);
        int commits = cmd.path("commits").asInt(1);
        List<String> partitions = new ArrayList<>();
        JsonNode given = cmd.get("partitions");
        if (given != null && given.isArray()) {
            given.forEach(n -> partitions.add(n.asText()));
        } else {
            partitions.add("2024-01-01");
            partitions.add("2024-01-02");
        }
        boolean pk = !table.primaryKeys().isEmpty();
        boolean unaware = !pk && table.coreOptions().bucket() == -1;
        List<String> opLog = new ArrayList<>();
        try (IOManager ioManager = IOManager.create(System.getProperty("java.io.tmpdir"))) {
            Gen g =
                    new Gen(
                            new Random(seed),
                            pk,
                            unaware,
                            table,
                            ioManager,
                            "lakesweep-write-" + branch + "-" + seed,
                            partitions);
            for (int i = 0; i < commits; i++) {
                opLog.add(doWrite(g));
            }
        }
        ObjectNode res = JSON.createObjectNode();
        res.put("latest", table.snapshotManager().latestSnapshotId());
        ArrayNode opsDone = res.putArray("ops");
        opLog.forEach(opsDone::add);
        return res;
    }

    // ------------------------------------------------------------------ orphan clean

    /**
     * Paimon 0.9's OrphanFilesClean with a file cleaner that records instead of deleting. The
     * cleaner runs on OrphanFilesClean's own thread pool, hence the synchronized map.
     */
    private static ObjectNode orphanClean(JsonNode cmd) throws Exception {
        if (!cmd.hasNonNull("olderThanMillis")) {
            throw new IllegalArgumentException("missing field 'olderThanMillis'");
        }
        long olderThanMillis = cmd.get("olderThanMillis").asLong();
        FileStoreTable table = open(tablePath(cmd));
        Map<String, Boolean> cleaned = Collections.synchronizedMap(new TreeMap<>());
        OrphanFilesClean clean =
                new OrphanFilesClean(table)
                        .fileCleaner(
                                p -> {
                                    try {
                                        cleaned.put(p.toUri().getPath(), table.fileIO().isDir(p));
                                    } catch (IOException e) {
                                        throw new UncheckedIOException(e);
                                    }
                                });
        Field threshold = OrphanFilesClean.class.getDeclaredField("olderThanMillis");
        threshold.setAccessible(true);
        threshold.setLong(clean, olderThanMillis);
        TreeSet<String> returned = new TreeSet<>();
        for (Path p : clean.clean()) {
            returned.add(p.toUri().getPath());
        }
        ObjectNode res = JSON.createObjectNode();
        ArrayNode out = res.putArray("cleaned");
        synchronized (cleaned) {
            if (!returned.equals(cleaned.keySet())) {
                throw new IllegalStateException(
                        "OrphanFilesClean returned " + returned + " but cleaned " + cleaned.keySet());
            }
            for (Map.Entry<String, Boolean> e : cleaned.entrySet()) {
                ObjectNode n = out.addObject();
                n.put("path", e.getKey());
                n.put("dir", e.getValue());
            }
        }
        return res;
    }

    // ------------------------------------------------------------------ live files

    /** Files of one snapshot as reported by Paimon's SnapshotReader, relative to the root. */
    private static TreeSet<String> filesOf(
            FileStoreTable table, Path root, Snapshot snapshot, ScanMode mode, boolean withDv) {
        SnapshotReader reader = table.newSnapshotReader().withSnapshot(snapshot).withMode(mode);
        TreeSet<String> out = new TreeSet<>();
        for (DataSplit split : reader.read().dataSplits()) {
            String bucketDir = relative(root, split.bucketPath());
            for (DataFileMeta f : split.dataFiles()) {
                out.add(bucketDir + "/" + f.fileName());
                for (String extra : f.extraFiles()) {
                    out.add(bucketDir + "/" + extra);
                }
            }
            if (withDv && split.deletionFiles().isPresent()) {
                for (DeletionFile df : split.deletionFiles().get()) {
                    if (df != null) {
                        out.add(relative(root, df.path()));
                    }
                }
            }
        }
        return out;
    }

    /** Every file listed in the snapshot's index manifest (DV / hash index files). */
    private static TreeSet<String> indexFilesOf(FileStoreTable table, Path root, Snapshot s) {
        TreeSet<String> out = new TreeSet<>();
        if (s.indexManifest() == null) {
            return out;
        }
        IndexFileHandler handler = table.store().newIndexFileHandler();
        for (IndexManifestEntry e : handler.readManifest(s.indexManifest())) {
            out.add(relative(root, handler.filePath(e.indexFile()).toString()));
        }
        return out;
    }

    private static ArrayNode toArray(TreeSet<String> files) {
        ArrayNode a = JSON.createArrayNode();
        files.forEach(a::add);
        return a;
    }

    private static ObjectNode liveFiles(JsonNode cmd) throws Exception {
        Path path = tablePath(cmd);
        FileStoreTable table = open(path);
        SnapshotManager sm = table.snapshotManager();
        ObjectNode res = JSON.createObjectNode();
        ObjectNode snaps = res.putObject("snapshots");
        ObjectNode changelogs = res.putObject("changelogs");
        ObjectNode indexFiles = res.putObject("indexFiles");
        Long earliest = sm.earliestSnapshotId();
        Long latest = sm.latestSnapshotId();
        if (earliest != null && latest != null) {
            for (long id = earliest; id <= latest; id++) {
                if (!sm.snapshotExists(id)) {
                    continue;
                }
                Snapshot s = sm.snapshot(id);
                snaps.set(String.valueOf(id), toArray(filesOf(table, path, s, ScanMode.ALL, true)));
                TreeSet<String> idx = indexFilesOf(table, path, s);
                if (!idx.isEmpty()) {
                    indexFiles.set(String.valueOf(id), toArray(idx));
                }
                if (s.changelogManifestList() != null) {
                    changelogs.set(
                            String.valueOf(id),
                            toArray(filesOf(table, path, s, ScanMode.CHANGELOG, false)));
                }
            }
        }
        ObjectNode tags = res.putObject("tags");
        SortedMap<Snapshot, List<String>> tagged = table.tagManager().tags();
        TreeMap<String, Snapshot> byName = new TreeMap<>();
        for (Map.Entry<Snapshot, List<String>> e : tagged.entrySet()) {
            for (String name : e.getValue()) {
                byName.put(name, e.getKey());
            }
        }
        ObjectNode tagSnapshots = res.putObject("tagSnapshots");
        ObjectNode tagIndexFiles = res.putObject("tagIndexFiles");
        for (Map.Entry<String, Snapshot> e : byName.entrySet()) {
            tags.set(e.getKey(), toArray(filesOf(table, path, e.getValue(), ScanMode.ALL, true)));
            tagSnapshots.put(e.getKey(), e.getValue().id());
            TreeSet<String> idx = indexFilesOf(table, path, e.getValue());
            if (!idx.isEmpty()) {
                tagIndexFiles.set(e.getKey(), toArray(idx));
            }
        }
        return res;
    }

    // ------------------------------------------------------------------ read rows

    private static ObjectNode readRows(JsonNode cmd) throws Exception {
        Path path = tablePath(cmd);
        FileStoreTable table = open(path);
        Map<String, String> dyn = new HashMap<>();
        boolean hasSnapshot = cmd.hasNonNull("snapshot");
        boolean hasTag = cmd.hasNonNull("tag");
        if (hasSnapshot && hasTag) {
            throw new IllegalArgumentException("give snapshot or tag, not both");
        }
        if (hasSnapshot) {
            long id = cmd.get("snapshot").asLong();
            if (!table.snapshotManager().snapshotExists(id)) {
                throw new IllegalArgumentException("snapshot " + id + " does not exist");
            }
            dyn.put(CoreOptions.SCAN_SNAPSHOT_ID.key(), String.valueOf(id));
        } else if (hasTag) {
            String tag = cmd.get("tag").asText();
            if (!table.tagManager().tagExists(tag)) {
                throw new IllegalArgumentException("tag '" + tag + "' does not exist");
            }
            dyn.put(CoreOptions.SCAN_TAG_NAME.key(), tag);
        }
        FileStoreTable t = dyn.isEmpty() ? table : table.copy(dyn);
        RowType rowType = t.rowType();
        List<DataField> fields = rowType.getFields();
        InternalRow.FieldGetter[] getters = new InternalRow.FieldGetter[fields.size()];
        for (int i = 0; i < getters.length; i++) {
            getters[i] = InternalRow.createFieldGetter(fields.get(i).type(), i);
        }
        ReadBuilder rb = t.newReadBuilder();
        List<Split> splits = rb.newScan().plan().splits();
        List<String> rows = new ArrayList<>();
        try (IOManager io = IOManager.create(System.getProperty("java.io.tmpdir"));
                RecordReader<InternalRow> reader =
                        rb.newRead().withIOManager(io).createReader(splits)) {
            reader.forEachRemaining(
                    row -> {
                        Map<String, Object> m = new LinkedHashMap<>();
                        for (int i = 0; i < getters.length; i++) {
                            Object v = getters[i].getFieldOrNull(row);
                            if (v instanceof BinaryString) {
                                v = v.toString();
                            } else if (v != null
                                    && !(v instanceof Number)
                                    && !(v instanceof Boolean)) {
                                v = v.toString();
                            }
                            m.put(fields.get(i).name(), v);
                        }
                        if (row.getRowKind() != RowKind.INSERT) {
                            m.put("_rowkind", row.getRowKind().shortString());
                        }
                        try {
                            rows.add(JSON.writeValueAsString(m));
                        } catch (Exception e) {
                            throw new RuntimeException(e);
                        }
                    });
        }
        Collections.sort(rows);
        ObjectNode res = JSON.createObjectNode();
        ArrayNode arr = res.putArray("rows");
        for (String row : rows) {
            arr.add(JSON.readTree(row));
        }
        return res;
    }

    // ------------------------------------------------------------------ partition_time

    /**
     * {"cmd":"partition_time","keys":[K,...],"values":[[V,...],...],"pattern":P|null,"formatter":F|null}:
     * Paimon's own PartitionTimeExtractor on each row of string values; per row either
     * {"time": ISO LocalDateTime} or {"error": exception class name}.
     */
    private static ObjectNode partitionTime(JsonNode cmd) {
        String pattern = cmd.hasNonNull("pattern") ? cmd.get("pattern").asText() : null;
        String formatter = cmd.hasNonNull("formatter") ? cmd.get("formatter").asText() : null;
        List<String> keys = new ArrayList<>();
        cmd.path("keys").forEach(k -> keys.add(k.asText()));
        org.apache.paimon.partition.PartitionTimeExtractor extractor =
                new org.apache.paimon.partition.PartitionTimeExtractor(pattern, formatter);
        ObjectNode res = JSON.createObjectNode();
        ArrayNode out = res.putArray("results");
        for (JsonNode row : cmd.path("values")) {
            List<String> values = new ArrayList<>();
            row.forEach(v -> values.add(v.isNull() ? null : v.asText()));
            ObjectNode r = out.addObject();
            try {
                r.put("time", extractor.extract(keys, values).toString());
            } catch (Exception e) {
                r.put("error", e.getClass().getSimpleName());
            }
        }
        return res;
    }

    // ------------------------------------------------------------------ expire_partitions

    /**
     * {"cmd":"expire_partitions","table":DIR,"expirationTime":"2 d" | "<ms>","strategy":S,
     * "timestampFormatter":F,"timestampPattern":P,"now":ISO | [ISO,...],"via":"procedure"|"table",
     * "checkInterval":"1 d","lastCheck":ISO}: Paimon 0.9's own PartitionExpire, run once per "now"
     * on one instance through its package-private expire(LocalDateTime now, long commitIdentifier)
     * (the public expire(id) reads LocalDateTime.now()), with commitIdentifier Long.MAX_VALUE as
     * the procedures pass it.
     *
     * <p>via "procedure" (default) builds it exactly as 0.9's expire_partitions procedures (Flink
     * and Spark) do: the options are only the procedure's arguments (strategy, formatter,
     * pattern; the table's own partition.* options are NOT read), the check interval is 0, the
     * commit user is "", no metastore client (a filesystem table has none). via "table" is the
     * writer's path: FileStore#newPartitionExpire("") of the table copied with these options as
     * dynamic options over its own (so the table's partition.* options count, and checkInterval
     * is partition.expiration-check-interval, 1 h unless set); "lastCheck" then sets the
     * instance's last check (setLastCheck, as PartitionExpireTest does) before the first run.
     *
     * <p>0.9 has no partition.expiration-max-num / max_expires (1.0) and no
     * partition.expiration-batch-size: "maxExpires" and "batchSize" are refused, not ignored.
     * Answers "runs": [{"now", "expired": [{key: value}] in Paimon's order, or null when the
     * check interval had not passed, "snapshots": [{id, commitKind, timeMillis, ...}] committed by
     * that run}], plus "expired" and "snapshots" over all runs.
     */
    private static ObjectNode expirePartitions(JsonNode cmd) throws Exception {
        for (String unsupported : new String[] {"maxExpires", "batchSize"}) {
            if (cmd.hasNonNull(unsupported)) {
                throw new UnsupportedOperationException(
                        "Paimon 0.9 has no '"
                                + unsupported
                                + "' (partition.expiration-max-num came in 1.0, "
                                + "partition.expiration-batch-size later): "
                                + "it drops every expired partition in one OVERWRITE commit");
            }
        }
        Path path = tablePath(cmd);
        FileStoreTable table = open(path);
        String via = cmd.hasNonNull("via") ? cmd.get("via").asText() : "procedure";
        JsonNode expirationNode = cmd.get("expirationTime");
        if (expirationNode == null || !(expirationNode.isTextual() || expirationNode.isIntegralNumber())) {
            throw new IllegalArgumentException("missing field 'expirationTime' (a duration such as '2 d', or ms)");
        }
        // TimeUtils.parseDuration reads a bare number as milliseconds
        String expirationTime = expirationNode.asText();
        Map<String, String> given = new HashMap<>();
        given.put(CoreOptions.PARTITION_EXPIRATION_STRATEGY.key(), textOrNull(cmd, "strategy"));
        given.put(CoreOptions.PARTITION_TIMESTAMP_FORMATTER.key(), textOrNull(cmd, "timestampFormatter"));
        given.put(CoreOptions.PARTITION_TIMESTAMP_PATTERN.key(), textOrNull(cmd, "timestampPattern"));
        org.apache.paimon.operation.PartitionExpire expire;
        SnapshotManager sm = table.snapshotManager();
        if (via.equals("procedure")) {
            if (cmd.hasNonNull("checkInterval") || cmd.hasNonNull("lastCheck")) {
                throw new IllegalArgumentException(
                        "the procedure's check interval is always 0: checkInterval and lastCheck need via 'table'");
            }
            // as ExpirePartitionsProcedure (0.9, Flink and Spark): a map of the three
            // arguments, nulls included, read by CoreOptions.fromMap
            org.apache.paimon.FileStore<?> store = table.store();
            expire =
                    new org.apache.paimon.operation.PartitionExpire(
                            org.apache.paimon.utils.TimeUtils.parseDuration(expirationTime),
                            Duration.ofMillis(0L),
                            org.apache.paimon.partition.PartitionExpireStrategy
                                    .createPartitionExpireStrategy(
                                            CoreOptions.fromMap(given), store.partitionType()),
                            store.newScan(),
                            store.newCommit(""),
                            null);
        } else if (via.equals("table")) {
            Map<String, String> dynamic = new HashMap<>();
            given.forEach(
                    (k, v) -> {
                        if (v != null) {
                            dynamic.put(k, v);
                        }
                    });
            dynamic.put(CoreOptions.PARTITION_EXPIRATION_TIME.key(), expirationTime);
            if (cmd.hasNonNull("checkInterval")) {
                dynamic.put(
                        CoreOptions.PARTITION_EXPIRATION_CHECK_INTERVAL.key(),
                        cmd.get("checkInterval").asText());
            }
            expire = table.copy(dynamic).store().newPartitionExpire("");
            if (expire == null) {
                throw new IllegalStateException(
                        "Paimon made no PartitionExpire for " + path + " (a table without partition keys?)");
            }
            if (cmd.hasNonNull("lastCheck")) {
                java.lang.reflect.Method setLastCheck =
                        org.apache.paimon.operation.PartitionExpire.class.getDeclaredMethod(
                                "setLastCheck", LocalDateTime.class);
                setLastCheck.setAccessible(true);
                setLastCheck.invoke(expire, LocalDateTime.parse(cmd.get("lastCheck").asText()));
            }
        } else {
            throw new IllegalArgumentException("via must be 'procedure' or 'table', got '" + via + "'");
        }
        List<String> nows = new ArrayList<>();
        JsonNode nowNode = cmd.get("now");
        if (nowNode != null && nowNode.isArray()) {
            nowNode.forEach(n -> nows.add(n.asText()));
        } else {
            nows.add(requireText(cmd, "now"));
        }
        java.lang.reflect.Method run =
                org.apache.paimon.operation.PartitionExpire.class.getDeclaredMethod(
                        "expire", LocalDateTime.class, long.class);
        run.setAccessible(true);
        ObjectNode res = JSON.createObjectNode();
        ArrayNode runs = res.putArray("runs");
        ArrayNode allExpired = res.putArray("expired");
        ArrayNode allSnapshots = res.putArray("snapshots");
        for (String now : nows) {
            Long before = sm.latestSnapshotId();
            List<Map<String, String>> expired;
            try {
                @SuppressWarnings("unchecked")
                List<Map<String, String>> out =
                        (List<Map<String, String>>)
                                run.invoke(expire, LocalDateTime.parse(now), Long.MAX_VALUE);
                expired = out;
            } catch (java.lang.reflect.InvocationTargetException e) {
                // Paimon's own exception, not the reflection wrapper
                if (e.getCause() instanceof Exception) {
                    throw (Exception) e.getCause();
                }
                throw e;
            }
            ObjectNode r = runs.addObject();
            r.put("now", now);
            if (expired == null) {
                r.putNull("expired");
            } else {
                ArrayNode parts = r.putArray("expired");
                for (Map<String, String> spec : expired) {
                    ObjectNode o = parts.addObject();
                    spec.forEach(o::put);
                    allExpired.add(o.deepCopy());
                }
            }
            ArrayNode snaps = r.putArray("snapshots");
            Long after = sm.latestSnapshotId();
            if (after != null) {
                for (long id = (before == null ? 1 : before + 1); id <= after; id++) {
                    ObjectNode o = snapshotJson(sm.snapshot(id));
                    snaps.add(o);
                    allSnapshots.add(o.deepCopy());
                }
            }
        }
        return res;
    }

    // ------------------------------------------------------------------ expire_consumers

    /**
     * {"cmd":"expire_consumers","table":DIR,"branch":B,"expireDateTime":"2024-01-01T00:00:00"}: Paimon's
     * own ConsumerManager#expire of the branch (a writer runs it with now - consumer.expiration-time).
     * Returns the consumer ids left.
     */
    private static ObjectNode expireConsumers(JsonNode cmd) throws Exception {
        Path path = tablePath(cmd);
        String branch = cmd.hasNonNull("branch") ? cmd.get("branch").asText() : "main";
        org.apache.paimon.consumer.ConsumerManager consumers =
                new org.apache.paimon.consumer.ConsumerManager(LocalFileIO.create(), path, branch);
        consumers.expire(LocalDateTime.parse(requireText(cmd, "expireDateTime")));
        ObjectNode res = JSON.createObjectNode();
        ArrayNode left = res.putArray("left");
        List<String> ids = new ArrayList<>(consumers.listAllIds());
        Collections.sort(ids);
        ids.forEach(left::add);
        return res;
    }

    // ------------------------------------------------------------------ tags

    /**
     * {"cmd":"create_tag","table":DIR,"name":N,"snapshot":ID,"timeRetainedMs":MS|null}: Paimon's
     * createTag, with a time retained when given (the tag records its creation time then).
     */
    private static ObjectNode createTag(JsonNode cmd) {
        FileStoreTable table = open(tablePath(cmd));
        String name = requireText(cmd, "name");
        long snapshot = cmd.get("snapshot").asLong();
        if (cmd.hasNonNull("timeRetainedMs")) {
            table.createTag(name, snapshot, Duration.ofMillis(cmd.get("timeRetainedMs").asLong()));
        } else {
            table.createTag(name, snapshot);
        }
        return JSON.createObjectNode();
    }

    /** {"cmd":"delete_tags","table":DIR,"names":[N,...]}: Paimon's deleteTag of each, in order. */
    private static ObjectNode deleteTags(JsonNode cmd) {
        FileStoreTable table = open(tablePath(cmd));
        for (JsonNode n : cmd.path("names")) {
            table.deleteTag(n.asText());
        }
        return JSON.createObjectNode();
    }

    /**
     * {"cmd":"expire_tags","table":DIR}: Paimon 0.9's TagTimeExpire at the current time (each tag with a
     * time retained is deleted once its creation time plus that has passed). Returns the tags left.
     */
    private static ObjectNode expireTags(JsonNode cmd) {
        FileStoreTable table = open(tablePath(cmd));
        org.apache.paimon.tag.TagTimeExpire.create(
                        table.snapshotManager(),
                        table.tagManager(),
                        table.store().newTagDeletion(),
                        java.util.Collections.emptyList())
                .run();
        ObjectNode res = JSON.createObjectNode();
        ArrayNode left = res.putArray("left");
        List<String> names = new ArrayList<>(table.tagManager().allTagNames());
        Collections.sort(names);
        names.forEach(left::add);
        return res;
    }

    // ------------------------------------------------------------------ expire_changelog

    /**
     * {"cmd":"expire_changelog","table":DIR,"changelogRetainMin":N,"changelogRetainMax":N,
     * "changelogTimeRetainedMs":MS,"maxDeletes":N}: Paimon 0.9's own ExpireChangelogImpl (decoupled
     * changelog expiry) with that config; returns {"expired": n}.
     */
    private static ObjectNode expireChangelog(JsonNode cmd) {
        FileStoreTable table = open(tablePath(cmd));
        ExpireConfig.Builder b = ExpireConfig.builder();
        b.changelogRetainMin(cmd.get("changelogRetainMin").asInt());
        b.changelogRetainMax(cmd.get("changelogRetainMax").asInt());
        b.changelogTimeRetain(Duration.ofMillis(cmd.get("changelogTimeRetainedMs").asLong()));
        b.changelogMaxDeletes(cmd.get("maxDeletes").asInt());
        int expired = table.newExpireChangelog().config(b.build()).expire();
        ObjectNode res = JSON.createObjectNode();
        res.put("expired", expired);
        return res;
    }

    // ------------------------------------------------------------------ auto_tag_create

    /**
     * {"cmd":"auto_tag_create","table":DIR,"options":{K:V,...}}: Paimon 0.9's own TagAutoCreation#run on
     * the table with these options added (tag.automatic-creation=process-time, tag.num-retained-max=N...):
     * the previous period's tag on the snapshot after the last automatically created one, then the
     * automatically created tags of the oldest snapshots beyond tag.num-retained-max deleted as deleteTag
     * deletes them. Returns the tags left.
     */
    private static ObjectNode autoTagCreate(JsonNode cmd) {
        Map<String, String> dynamic = new HashMap<>();
        cmd.path("options").fields().forEachRemaining(e -> dynamic.put(e.getKey(), e.getValue().asText()));
        FileStoreTable table = open(tablePath(cmd)).copy(dynamic);
        org.apache.paimon.tag.TagAutoCreation creation =
                org.apache.paimon.tag.TagAutoCreation.create(
                        table.coreOptions(),
                        table.snapshotManager(),
                        table.tagManager(),
                        table.store().newTagDeletion(),
                        Collections.emptyList());
        if (creation == null) {
            throw new IllegalArgumentException("the options create no tags automatically");
        }
        creation.run();
        ObjectNode res = JSON.createObjectNode();
        ArrayNode left = res.putArray("left");
        List<String> names = new ArrayList<>(table.tagManager().allTagNames());
        Collections.sort(names);
        names.forEach(left::add);
        return res;
    }

    // ------------------------------------------------------------------ write_partitions, partitions

    private static String textOrNull(JsonNode cmd, String field) {
        JsonNode n = cmd.get(field);
        return n == null || n.isNull() ? null : n.asText();
    }

    private static ObjectNode snapshotJson(Snapshot s) {
        ObjectNode o = JSON.createObjectNode();
        o.put("id", s.id());
        o.put("commitKind", s.commitKind().name());
        o.put("timeMillis", s.timeMillis());
        o.put("commitUser", s.commitUser());
        o.put("commitIdentifier", s.commitIdentifier());
        o.put("totalRecordCount", s.totalRecordCount());
        return o;
    }

    /** Names of the columns write_partitions adds after the partition keys. */
    private static final List<String> VALUE_COLUMNS = java.util.Arrays.asList("id", "v", "s");

    /**
     * {"cmd":"write_partitions","table":DIR,"kind":"append"|"pk",
     * "partitionKeys":[{"name":"dt","type":"STRING"},...],"options":{...},
     * "partitions":[["20230101","us"],[null,""],...],"commits":N,"rowsPerPartition":N,
     * "firstId":N,"seed":N,"creationTimes":[ISO local date-time,...]}
     *
     * <p>Creates the table when DIR has no schema yet: the partition keys (types in Paimon's SQL
     * spelling: STRING, INT, DATE, TIMESTAMP(3), ...; parsed by DataTypeJsonParser) then columns
     * id INT, v INT, s STRING; "pk" makes PRIMARY KEY (partition keys..., id), which Paimon makes
     * NOT NULL, so null partition values need "append". "options" are the table options
     * (Paimon's defaults otherwise: bucket -1, orc). On an existing table the call appends:
     * "kind" and "partitionKeys" must then match the table and "options" must be absent.
     *
     * <p>Each of "commits" commits (default 1) writes "rowsPerPartition" rows (default 1) into
     * every listed partition through Paimon's TableWrite (write-only, so nothing compacts or
     * expires) and commits them as one APPEND snapshot, waiting until the clock is 10 ms past it.
     * Partition values are strings cast to the key's type as Paimon casts partition specs
     * (TypeUtils.castFromString: DATE "2023-01-01", TIMESTAMP "2023-01-01 10:00:00"), or null.
     * Row j of commit c has id = firstId + c * rowsPerPartition + j, v drawn from the seed and
     * s = "c<c>-r<j>". "creationTimes" (one per commit) replaces the _CREATION_TIME Paimon's
     * writer recorded for that commit's new files (the files are untouched; only their manifest
     * entries carry the time): that is the time update-time expiry compares. Snapshot times
     * are the real clock's and are reported.
     *
     * <p>Answers "snapshots" (every snapshot of the table), "committed" (ids this call made) and
     * "partitions" as the partitions command does.
     */
    private static ObjectNode writePartitions(JsonNode cmd) throws Exception {
        Path path = tablePath(cmd);
        LocalFileIO fileIO = LocalFileIO.create();
        boolean exists = fileIO.exists(new Path(path, "schema"));
        String kind = textOrNull(cmd, "kind");
        if (kind != null && !kind.equals("append") && !kind.equals("pk")) {
            throw new IllegalArgumentException("kind must be 'append' or 'pk', got " + kind);
        }
        List<DataField> keyFields = new ArrayList<>();
        JsonNode keysNode = cmd.get("partitionKeys");
        if (keysNode != null && !keysNode.isNull()) {
            int i = 0;
            for (JsonNode k : keysNode) {
                String name = requireText(k, "name");
                if (VALUE_COLUMNS.contains(name)) {
                    throw new IllegalArgumentException(
                            "partition key '" + name + "' clashes with a value column " + VALUE_COLUMNS);
                }
                keyFields.add(
                        new DataField(
                                i++,
                                name,
                                org.apache.paimon.types.DataTypeJsonParser.parseAtomicTypeSQLString(
                                        requireText(k, "type"))));
            }
        }
        if (!exists) {
            if (keysNode == null || keysNode.isNull()) {
                throw new IllegalArgumentException("partitionKeys are needed to create " + path);
            }
            boolean pk = "pk".equals(kind);
            Schema.Builder sb = Schema.newBuilder();
            List<String> keyNames = new ArrayList<>();
            for (DataField f : keyFields) {
                sb.column(f.name(), f.type());
                keyNames.add(f.name());
            }
            sb.column("id", DataTypes.INT()).column("v", DataTypes.INT()).column("s", DataTypes.STRING());
            sb.partitionKeys(keyNames);
            if (pk) {
                List<String> primary = new ArrayList<>(keyNames);
                primary.add("id");
                sb.primaryKey(primary);
            }
            Map<String, String> options = new TreeMap<>();
            JsonNode given = cmd.get("options");
            if (given != null && given.isObject()) {
                given.fields().forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
            }
            sb.options(options);
            new SchemaManager(fileIO, path).createTable(sb.build());
        } else if (cmd.hasNonNull("options") && cmd.get("options").size() > 0) {
            throw new IllegalArgumentException(
                    "options apply only when the table is created; " + path + " exists");
        }
        FileStoreTable table = open(path);
        if (exists) {
            boolean pk = !table.primaryKeys().isEmpty();
            if (kind != null && pk != kind.equals("pk")) {
                throw new IllegalArgumentException(
                        path + " is " + (pk ? "a primary-key" : "an append") + " table, not '" + kind + "'");
            }
            if (keysNode != null && !keysNode.isNull()) {
                RowType have = table.schema().logicalPartitionType();
                List<String> want = new ArrayList<>();
                List<String> got = new ArrayList<>();
                keyFields.forEach(f -> want.add(f.name() + " " + f.type().asSQLString()));
                have.getFields().forEach(f -> got.add(f.name() + " " + f.type().asSQLString()));
                if (!want.equals(got)) {
                    throw new IllegalArgumentException(
                            path + " is partitioned by " + got + ", not " + want);
                }
            }
        }
        RowType partitionType = table.schema().logicalPartitionType();
        int nKeys = partitionType.getFieldCount();
        List<Object[]> partitionValues = new ArrayList<>();
        for (JsonNode p : cmd.path("partitions")) {
            if (!p.isArray() || p.size() != nKeys) {
                throw new IllegalArgumentException(
                        "partition " + p + " must list " + nKeys + " values (null or strings)");
            }
            Object[] values = new Object[nKeys];
            for (int i = 0; i < nKeys; i++) {
                JsonNode v = p.get(i);
                values[i] =
                        v.isNull()
                                ? null
                                : org.apache.paimon.utils.TypeUtils.castFromString(
                                        v.asText(), partitionType.getTypeAt(i));
            }
            partitionValues.add(values);
        }
        if (partitionValues.isEmpty() && nKeys > 0) {
            throw new IllegalArgumentException("no partitions to write");
        }
        if (nKeys == 0) {
            partitionValues.add(new Object[0]);
        }
        int commits = cmd.path("commits").asInt(1);
        int rowsPerPartition = cmd.path("rowsPerPartition").asInt(1);
        int firstId = cmd.path("firstId").asInt(0);
        if (commits < 1 || rowsPerPartition < 1) {
            throw new IllegalArgumentException("commits and rowsPerPartition must be >= 1");
        }
        List<LocalDateTime> creationTimes = new ArrayList<>();
        JsonNode timesNode = cmd.get("creationTimes");
        if (timesNode != null && !timesNode.isNull()) {
            timesNode.forEach(t -> creationTimes.add(LocalDateTime.parse(t.asText())));
            if (creationTimes.size() != commits) {
                throw new IllegalArgumentException(
                        "creationTimes lists " + creationTimes.size() + " times for " + commits + " commits");
            }
        }
        Random r = new Random(cmd.path("seed").asLong(0));
        SnapshotManager sm = table.snapshotManager();
        Long before = sm.latestSnapshotId();
        long identifier = (before == null ? 0 : before) + 1;
        String user = "lakesweep-write-partitions";
        FileStoreTable writeOnly =
                table.copy(Collections.singletonMap(CoreOptions.WRITE_ONLY.key(), "true"));
        try (IOManager ioManager = IOManager.create(System.getProperty("java.io.tmpdir"))) {
            for (int c = 0; c < commits; c++) {
                List<CommitMessage> messages;
                try (TableWriteImpl<?> write = writeOnly.newWrite(user).withIOManager(ioManager)) {
                    for (Object[] values : partitionValues) {
                        for (int j = 0; j < rowsPerPartition; j++) {
                            Object[] row = new Object[nKeys + 3];
                            System.arraycopy(values, 0, row, 0, nKeys);
                            row[nKeys] = firstId + c * rowsPerPartition + j;
                            row[nKeys + 1] = r.nextInt(1000);
                            row[nKeys + 2] = BinaryString.fromString("c" + c + "-r" + j);
                            write.write(GenericRow.of(row));
                        }
                    }
                    messages = write.prepareCommit(true, identifier);
                }
                if (!creationTimes.isEmpty()) {
                    messages = withCreationTime(messages, creationTimes.get(c));
                }
                try (TableCommitImpl commit = writeOnly.newCommit(user)) {
                    commit.commit(identifier++, messages);
                }
                Snapshot latest = sm.latestSnapshot();
                for (long now = System.currentTimeMillis();
                        now < latest.timeMillis() + MIN_SNAPSHOT_GAP_MS;
                        now = System.currentTimeMillis()) {
                    Thread.sleep(latest.timeMillis() + MIN_SNAPSHOT_GAP_MS - now);
                }
            }
        }
        ObjectNode res = JSON.createObjectNode();
        ArrayNode snaps = res.putArray("snapshots");
        ArrayNode committed = res.putArray("committed");
        Long earliest = sm.earliestSnapshotId();
        Long latest = sm.latestSnapshotId();
        for (long id = earliest; id <= latest; id++) {
            if (sm.snapshotExists(id)) {
                snaps.add(snapshotJson(sm.snapshot(id)));
                if (before == null || id > before) {
                    committed.add(id);
                }
            }
        }
        res.set("partitions", describePartitions(open(path), path, null));
        return res;
    }

    /** The messages with every new data and changelog file's creation time set to {@code time}. */
    private static List<CommitMessage> withCreationTime(List<CommitMessage> messages, LocalDateTime time) {
        org.apache.paimon.data.Timestamp ts =
                org.apache.paimon.data.Timestamp.fromLocalDateTime(time).toMillisTimestamp();
        List<CommitMessage> out = new ArrayList<>();
        for (CommitMessage m0 : messages) {
            CommitMessageImpl m = (CommitMessageImpl) m0;
            if (!m.compactIncrement().isEmpty()) {
                throw new IllegalStateException("a write-only commit compacted: " + m);
            }
            DataIncrement data = m.newFilesIncrement();
            out.add(
                    new CommitMessageImpl(
                            m.partition(),
                            m.bucket(),
                            new DataIncrement(
                                    retimed(data.newFiles(), ts),
                                    data.deletedFiles(),
                                    retimed(data.changelogFiles(), ts)),
                            m.compactIncrement(),
                            m.indexIncrement()));
        }
        return out;
    }

    private static List<DataFileMeta> retimed(List<DataFileMeta> files, org.apache.paimon.data.Timestamp ts) {
        List<DataFileMeta> out = new ArrayList<>();
        for (DataFileMeta f : files) {
            out.add(
                    new DataFileMeta(
                            f.fileName(),
                            f.fileSize(),
                            f.rowCount(),
                            f.minKey(),
                            f.maxKey(),
                            f.keyStats(),
                            f.valueStats(),
                            f.minSequenceNumber(),
                            f.maxSequenceNumber(),
                            f.schemaId(),
                            f.level(),
                            f.extraFiles(),
                            ts,
                            f.deleteRowCount().orElse(null),
                            f.embeddedIndex(),
                            f.fileSource().orElse(null)));
        }
        return out;
    }

    /**
     * {"cmd":"partitions","table":DIR,"snapshot":N}: the live partitions of a snapshot (latest when
     * absent), sorted by path then spec: "spec" {key: value} with each value as 0.9's
     * PartitionExpireStrategy names it (the internal object's toString: DATE as epoch days,
     * TIMESTAMP as LocalDateTime#toString) or null, "path" (Paimon's partition directory, where
     * null and "" both become partition.default-name), "files" (the live data files, relative to
     * the root, from Paimon's SnapshotReader), and "fileCount", "recordCount" and
     * "lastFileCreationTime" (epoch ms) of Paimon's own PartitionEntry (FileStoreScan
     * readPartitionEntries: ADD and DELETE entries merged; the time is the newest _CREATION_TIME of
     * either, read as a local date-time in this JVM's zone).
     */
    private static ObjectNode partitions(JsonNode cmd) {
        Path path = tablePath(cmd);
        Long snapshot = cmd.hasNonNull("snapshot") ? cmd.get("snapshot").asLong() : null;
        ObjectNode res = JSON.createObjectNode();
        res.set("partitions", describePartitions(open(path), path, snapshot));
        return res;
    }

    private static ArrayNode describePartitions(FileStoreTable table, Path root, Long snapshotId) {
        ArrayNode out = JSON.createArrayNode();
        Snapshot snapshot =
                snapshotId == null
                        ? table.snapshotManager().latestSnapshot()
                        : table.snapshotManager().snapshot(snapshotId);
        if (snapshot == null) {
            return out;
        }
        RowType partitionType = table.schema().logicalPartitionType();
        InternalRow.FieldGetter[] getters = new InternalRow.FieldGetter[partitionType.getFieldCount()];
        for (int i = 0; i < getters.length; i++) {
            getters[i] = InternalRow.createFieldGetter(partitionType.getTypeAt(i), i);
        }
        Map<BinaryRow, TreeSet<String>> files = new HashMap<>();
        Map<BinaryRow, String> paths = new HashMap<>();
        for (DataSplit split :
                table.newSnapshotReader().withSnapshot(snapshot).withMode(ScanMode.ALL).read().dataSplits()) {
            String bucketDir = relative(root, split.bucketPath());
            int slash = bucketDir.lastIndexOf('/');
            paths.put(split.partition(), slash < 0 ? "" : bucketDir.substring(0, slash));
            TreeSet<String> set = files.computeIfAbsent(split.partition(), k -> new TreeSet<>());
            for (DataFileMeta f : split.dataFiles()) {
                set.add(bucketDir + "/" + f.fileName());
            }
        }
        TreeMap<String, ObjectNode> sorted = new TreeMap<>();
        for (org.apache.paimon.manifest.PartitionEntry e :
                table.store().newScan().withSnapshot(snapshot).readPartitionEntries()) {
            ObjectNode p = JSON.createObjectNode();
            ObjectNode spec = p.putObject("spec");
            for (int i = 0; i < getters.length; i++) {
                Object v = getters[i].getFieldOrNull(e.partition());
                if (v == null) {
                    spec.putNull(partitionType.getFieldNames().get(i));
                } else {
                    spec.put(partitionType.getFieldNames().get(i), v.toString());
                }
            }
            String dir = paths.getOrDefault(e.partition(), null);
            p.put("path", dir);
            p.set("files", toArray(files.getOrDefault(e.partition(), new TreeSet<>())));
            p.put("fileCount", e.fileCount());
            p.put("recordCount", e.recordCount());
            p.put("lastFileCreationTime", e.lastFileCreationTime());
            sorted.put((dir == null ? "" : dir) + "\0" + spec.toString(), p);
        }
        sorted.values().forEach(out::add);
        return out;
    }
}
