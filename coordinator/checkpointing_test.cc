#include "coordinator/checkpointing.h"

#include "absl/strings/str_cat.h"
#include "coordinator/job_spec.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

// A variable of 10 rows x 4 split 6 + 4 over two ps, with Adam.
CheckpointContents Contents() {
  CheckpointContents c;
  c.checkpoint_id = 5;
  c.job_id = "j-1";
  c.job = *ParseJobSpec(R"({"name": "j", "model": "softmax", "partitioner": "fixed:2"})", 1);
  c.generation = 3;
  c.steps_done = 1003;
  c.total_steps = 5000;
  c.steps_per_epoch = 469;
  VariableLayout v;
  v.name = "j/w";
  v.shape = {10, 4};
  v.rows = 10;
  v.row_width = 4;
  v.num_elements = 40;
  c.snapshots.resize(2);
  c.files.resize(2);
  for (int k = 0; k < 2; ++k) {
    VariableLayout::Shard s;
    s.spec.set_name(absl::StrCat("j/w/part_", k));
    s.spec.set_variable("j/w");
    s.spec.set_part(k);
    s.spec.set_num_parts(2);
    s.spec.mutable_optimizer()->set_type(OptimizerSpec::ADAM);
    s.spec.mutable_optimizer()->set_learning_rate(0.001);
    s.ps = k;
    s.row_offset = k == 0 ? 0 : 6;
    s.rows = k == 0 ? 6 : 4;
    v.shards.push_back(s);
    ShardInfo* info = c.snapshots[k].add_shards();
    *info->mutable_spec() = s.spec;
    info->set_version(1003 + k);
    c.files[k].set_file(absl::StrCat("ps-0000", k, "-of-00002.safetensors"));
    for (const char* suffix : {"", "/adam_m", "/adam_v"}) {
      c.files[k].add_tensors()->set_name(absl::StrCat(s.spec.name(), suffix));
    }
  }
  c.variables.push_back(v);
  return c;
}

TEST(BuildManifestTest, RecordsEveryShardWithItsVersionFileAndSlots) {
  absl::StatusOr<Manifest> m = BuildManifest(Contents(), 1.5e9);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->checkpoint_id, 5);
  EXPECT_EQ(m->job_id, "j-1");
  EXPECT_EQ(m->generation, 3);
  EXPECT_EQ(m->progress.steps_done, 1003);
  EXPECT_EQ(m->progress.epoch, 2);
  EXPECT_EQ(m->progress.batch_index, 1003 - 2 * 469);
  ASSERT_EQ(m->variables.size(), 1u);
  const ManifestVariable& v = m->variables[0];
  EXPECT_EQ(v.partitioner, "fixed:2");
  EXPECT_EQ(v.slots, (std::vector<std::string>{"adam_m", "adam_v"}));
  ASSERT_EQ(v.shards.size(), 2u);
  EXPECT_EQ(v.shards[1].row_offset, 6);
  EXPECT_EQ(v.shards[1].rows, 4);
  EXPECT_EQ(v.shards[1].version, 1004);
  EXPECT_EQ(v.shards[1].file, "ps-00001-of-00002.safetensors");
  EXPECT_EQ(v.shards[1].tensors.at(""), "j/w/part_1");
  EXPECT_EQ(v.shards[1].tensors.at("adam_v"), "j/w/part_1/adam_v");
  // The job is embedded as its job file.
  EXPECT_TRUE(ParseJobSpec(m->job_json, 1).ok()) << m->job_json;
}

TEST(BuildManifestTest, RefusesAShardMissingFromItsPsSnapshot) {
  CheckpointContents c = Contents();
  c.snapshots[1].clear_shards();
  absl::StatusOr<Manifest> m = BuildManifest(c, 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("j/w/part_1"), std::string::npos) << m.status();
}

TEST(BuildManifestTest, RefusesASlotTensorMissingFromTheFile) {
  CheckpointContents c = Contents();
  c.files[0].mutable_tensors()->RemoveLast();
  absl::StatusOr<Manifest> m = BuildManifest(c, 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("j/w/part_0/adam_v"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace shardps
