module @tp {
  func.func public @main(%v0: tensor<2x3x3xf32>) -> (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>) {
    %v1 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v2 = "stablehlo.broadcast_in_dim"(%v1) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2x3xi32>
    %v3 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v4 = "stablehlo.broadcast_in_dim"(%v3) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2xi32>
    %v5 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x3xi32>
    %v6 = "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<2x3x3xi32>
    %v7 = "stablehlo.iota"() {iota_dimension = 2 : i64} : () -> tensor<2x3x3xi32>
    %v8 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v9:4 = "stablehlo.while"(%v8, %v0, %v2, %v4) ({
      ^bb0(%v10: tensor<i32>, %v11: tensor<2x3x3xf32>, %v12: tensor<2x3xi32>, %v13: tensor<2xi32>):
    %v14 = "stablehlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
    %v15 = "stablehlo.compare"(%v10, %v14) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<i32>, tensor<i32>) -> tensor<i1>
        "stablehlo.return"(%v15) : (tensor<i1>) -> ()
    }, {
      ^bb0(%v16: tensor<i32>, %v17: tensor<2x3x3xf32>, %v18: tensor<2x3xi32>, %v19: tensor<2xi32>):
    %v20 = "stablehlo.broadcast_in_dim"(%v16) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2x3xi32>
    %v21 = "stablehlo.broadcast_in_dim"(%v16) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2x3x3xi32>
    %v22 = "stablehlo.constant"() {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
    %v23 = "stablehlo.broadcast_in_dim"(%v22) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
    %v24 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v25 = "stablehlo.dynamic_slice"(%v17, %v24, %v24, %v16) {slice_sizes = array<i64: 2, 3, 1>} : (tensor<2x3x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x3x1xf32>
    %v26 = "stablehlo.reshape"(%v25) : (tensor<2x3x1xf32>) -> tensor<2x3xf32>
    %v27 = "stablehlo.abs"(%v26) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %v28 = "stablehlo.compare"(%v5, %v20) {comparison_direction = #stablehlo<comparison_direction GE>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi1>
    %v29 = "stablehlo.select"(%v28, %v27, %v23) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v30 = "stablehlo.constant"() {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
    %v31 = "stablehlo.reduce"(%v29, %v30) ({
      ^bb0(%v32: tensor<f32>, %v33: tensor<f32>):
        %v34 = "stablehlo.maximum"(%v32, %v33) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%v34) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
    %v35 = "stablehlo.broadcast_in_dim"(%v31) {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>
    %v36 = "stablehlo.compare"(%v29, %v35) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %v37 = "stablehlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
    %v38 = "stablehlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
    %v39 = "stablehlo.broadcast_in_dim"(%v38) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2x3xi32>
    %v40 = "stablehlo.select"(%v36, %v5, %v39) : (tensor<2x3xi1>, tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
    %v41 = "stablehlo.reduce"(%v40, %v37) ({
      ^bb0(%v42: tensor<i32>, %v43: tensor<i32>):
        %v44 = "stablehlo.minimum"(%v42, %v43) : (tensor<i32>, tensor<i32>) -> tensor<i32>
        "stablehlo.return"(%v44) : (tensor<i32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3xi32>, tensor<i32>) -> tensor<2xi32>
    %v45 = "stablehlo.broadcast_in_dim"(%v16) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2xi32>
    %v46 = "stablehlo.constant"() {value = dense<3> : tensor<i32>} : () -> tensor<i32>
    %v47 = "stablehlo.broadcast_in_dim"(%v46) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2xi32>
    %v48 = "stablehlo.compare"(%v41, %v47) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %v49 = "stablehlo.select"(%v48, %v45, %v41) : (tensor<2xi1>, tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %v50 = "stablehlo.broadcast_in_dim"(%v49) {broadcast_dimensions = array<i64: 0>} : (tensor<2xi32>) -> tensor<2x3x3xi32>
    %v51 = "stablehlo.compare"(%v6, %v50) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3x3xi32>, tensor<2x3x3xi32>) -> tensor<2x3x3xi1>
    %v52 = "stablehlo.compare"(%v6, %v21) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3x3xi32>, tensor<2x3x3xi32>) -> tensor<2x3x3xi1>
    %v53 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v54 = "stablehlo.broadcast_in_dim"(%v53) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3x3xf32>
    %v55 = "stablehlo.select"(%v51, %v17, %v54) : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v56 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v57 = "stablehlo.reduce"(%v55, %v56) ({
      ^bb0(%v58: tensor<f32>, %v59: tensor<f32>):
        %v60 = "stablehlo.add"(%v58, %v59) : (tensor<f32>, tensor<f32>) -> tensor<f32>
        "stablehlo.return"(%v60) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 1>} : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %v61 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v62 = "stablehlo.dynamic_slice"(%v17, %v61, %v16, %v61) {slice_sizes = array<i64: 2, 1, 3>} : (tensor<2x3x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x1x3xf32>
    %v63 = "stablehlo.reshape"(%v62) : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
    %v64 = "stablehlo.broadcast_in_dim"(%v63) {broadcast_dimensions = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %v65 = "stablehlo.select"(%v51, %v64, %v17) : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v66 = "stablehlo.broadcast_in_dim"(%v57) {broadcast_dimensions = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %v67 = "stablehlo.select"(%v52, %v66, %v65) : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v68 = "stablehlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %v69 = "stablehlo.broadcast_in_dim"(%v68) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2xi32>
    %v70 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v71 = "stablehlo.add"(%v49, %v69) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %v72 = "stablehlo.reshape"(%v71) : (tensor<2xi32>) -> tensor<2x1xi32>
    %v73 = "stablehlo.dynamic_update_slice"(%v18, %v72, %v70, %v16) : (tensor<2x3xi32>, tensor<2x1xi32>, tensor<i32>, tensor<i32>) -> tensor<2x3xi32>
    %v74 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v75 = "stablehlo.dynamic_slice"(%v67, %v74, %v16, %v74) {slice_sizes = array<i64: 2, 1, 3>} : (tensor<2x3x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x1x3xf32>
    %v76 = "stablehlo.reshape"(%v75) : (tensor<2x1x3xf32>) -> tensor<2x3xf32>
    %v77 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v78 = "stablehlo.dynamic_slice"(%v76, %v77, %v16) {slice_sizes = array<i64: 2, 1>} : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x1xf32>
    %v79 = "stablehlo.reshape"(%v78) : (tensor<2x1xf32>) -> tensor<2xf32>
    %v80 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v81 = "stablehlo.broadcast_in_dim"(%v80) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2xf32>
    %v82 = "stablehlo.compare"(%v79, %v81) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %v83 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v84 = "stablehlo.broadcast_in_dim"(%v83) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<2xi32>
    %v85 = "stablehlo.compare"(%v19, %v84) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %v86 = "stablehlo.and"(%v82, %v85) : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
    %v87 = "stablehlo.add"(%v45, %v69) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %v88 = "stablehlo.select"(%v86, %v87, %v19) : (tensor<2xi1>, tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %v89 = "stablehlo.constant"() {value = dense<0> : tensor<i32>} : () -> tensor<i32>
    %v90 = "stablehlo.dynamic_slice"(%v67, %v89, %v89, %v16) {slice_sizes = array<i64: 2, 3, 1>} : (tensor<2x3x3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<2x3x1xf32>
    %v91 = "stablehlo.reshape"(%v90) : (tensor<2x3x1xf32>) -> tensor<2x3xf32>
    %v92 = "stablehlo.broadcast_in_dim"(%v79) {broadcast_dimensions = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>
    %v93 = "stablehlo.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
    %v94 = "stablehlo.broadcast_in_dim"(%v93) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
    %v95 = "stablehlo.divide"(%v94, %v92) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v96 = "stablehlo.multiply"(%v91, %v95) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v97 = "stablehlo.constant"() {value = dense<1.1754943508222875e-38> : tensor<f32>} : () -> tensor<f32>
    %v98 = "stablehlo.broadcast_in_dim"(%v97) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
    %v99 = "stablehlo.abs"(%v92) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %v100 = "stablehlo.compare"(%v99, %v98) {comparison_direction = #stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %v101 = "stablehlo.divide"(%v91, %v92) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v102 = "stablehlo.select"(%v100, %v101, %v96) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v103 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v104 = "stablehlo.broadcast_in_dim"(%v103) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
    %v105 = "stablehlo.compare"(%v92, %v104) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %v106 = "stablehlo.select"(%v105, %v91, %v102) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %v107 = "stablehlo.broadcast_in_dim"(%v106) {broadcast_dimensions = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %v108 = "stablehlo.broadcast_in_dim"(%v76) {broadcast_dimensions = array<i64: 0, 2>} : (tensor<2x3xf32>) -> tensor<2x3x3xf32>
    %v109 = "stablehlo.compare"(%v6, %v21) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3x3xi32>, tensor<2x3x3xi32>) -> tensor<2x3x3xi1>
    %v110 = "stablehlo.compare"(%v7, %v21) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3x3xi32>, tensor<2x3x3xi32>) -> tensor<2x3x3xi1>
    %v111 = "stablehlo.compare"(%v7, %v21) {comparison_direction = #stablehlo<comparison_direction EQ>, compare_type = #stablehlo<comparison_type SIGNED>} : (tensor<2x3x3xi32>, tensor<2x3x3xi32>) -> tensor<2x3x3xi1>
    %v112 = "stablehlo.multiply"(%v107, %v108) : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v113 = "stablehlo.subtract"(%v67, %v112) : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v114 = "stablehlo.and"(%v109, %v111) : (tensor<2x3x3xi1>, tensor<2x3x3xi1>) -> tensor<2x3x3xi1>
    %v115 = "stablehlo.select"(%v114, %v107, %v67) : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v116 = "stablehlo.and"(%v109, %v110) : (tensor<2x3x3xi1>, tensor<2x3x3xi1>) -> tensor<2x3x3xi1>
    %v117 = "stablehlo.select"(%v116, %v113, %v115) : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v118 = "stablehlo.constant"() {value = dense<1> : tensor<i32>} : () -> tensor<i32>
    %v119 = "stablehlo.add"(%v16, %v118) : (tensor<i32>, tensor<i32>) -> tensor<i32>
        "stablehlo.return"(%v119, %v117, %v73, %v88) : (tensor<i32>, tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>) -> ()
    }) : (tensor<i32>, tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>) -> (tensor<i32>, tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>)
    %v120 = "stablehlo.reshape"(%v9#0) : (tensor<i32>) -> tensor<i32>
    %v121 = "stablehlo.reshape"(%v9#1) : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
    %v122 = "stablehlo.reshape"(%v9#2) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    %v123 = "stablehlo.reshape"(%v9#3) : (tensor<2xi32>) -> tensor<2xi32>
    "func.return"(%v121, %v122, %v123) : (tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>) -> ()
  }
}
